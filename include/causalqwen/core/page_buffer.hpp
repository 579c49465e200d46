/// Large buffers on huge pages. A buffer that a step streams through from memory (a weight
/// matrix read once per decoded token, an arena of parameters) costs one TLB entry per 4 KiB
/// page on ordinary pages. From 4 MiB up such a buffer is an anonymous mapping aligned to 2 MiB
/// and marked MADV_HUGEPAGE, so that a kernel with transparent huge pages (`always` or
/// `madvise` in /sys/kernel/mm/transparent_hugepage/enabled) backs it with 2 MiB pages: one
/// page fault per 2 MiB when it is first written instead of 512, and fewer TLB misses when it
/// is read (bench_decode_stream compares the decoding kernels over both). A kernel without
/// transparent huge pages ignores the advice.
#pragma once
#include "causalqwen/core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include <sys/mman.h>

namespace causalqwen {

/// The size of a transparent huge page on x86-64.
inline constexpr std::size_t huge_page_bytes = std::size_t(2) << 20;
/// Buffers of at least this many bytes go on huge pages.
inline constexpr std::size_t huge_buffer_min_bytes = 2 * huge_page_bytes;

/// `bytes` (a multiple of 2 MiB) of zeroed anonymous memory starting at a 2 MiB boundary, marked
/// MADV_HUGEPAGE: the mapping is made 2 MiB longer and the slack on both sides unmapped.
/// Release with munmap(p, bytes).
inline void* map_huge_pages(std::size_t bytes, const char* who) {
  void* p = mmap(nullptr, bytes + huge_page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  detail::require(p != MAP_FAILED, who, "cannot map {} bytes", bytes + huge_page_bytes);
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (start + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
  if (aligned > start) munmap(p, aligned - start);
  if (const std::uintptr_t end = start + bytes + huge_page_bytes; end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

/// An owning array of n zero-initialised T (trivially copyable), 64-byte aligned; from
/// huge_buffer_min_bytes up, on huge pages (map_huge_pages). Movable, not copyable.
template <class T>
class PageBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "causalqwen::PageBuffer holds trivially copyable values only.");

 public:
  PageBuffer() = default;
  explicit PageBuffer(std::size_t n) : size_(n) {
    if (n == 0) return;
    const std::size_t raw = n * sizeof(T);
    if (raw >= huge_buffer_min_bytes) {
      const std::size_t bytes = (raw + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
      data_ = std::unique_ptr<T, Free>(static_cast<T*>(map_huge_pages(bytes, "PageBuffer")), Free{bytes});
      return;  // anonymous memory is zero already
    }
    const std::size_t bytes = (raw + 63) / 64 * 64;
    data_ = std::unique_ptr<T, Free>(static_cast<T*>(std::aligned_alloc(64, bytes)), Free{0});
    detail::require(data_ != nullptr, "PageBuffer", "cannot allocate {} bytes", bytes);
    std::memset(static_cast<void*>(data_.get()), 0, bytes);
  }

  /// Room for n elements: when this buffer holds fewer, a new zeroed one of max(n, 1.5 × the
  /// old size) (the values are not kept), else this one; its data(). A scratch buffer so grows
  /// once per larger shape, and a shape that creeps up (attention's products while decoding, one
  /// key longer every step) replaces it a few times per doubling instead of at every step.
  T* grow(std::size_t n) {
    if (size_ < n) *this = PageBuffer(std::max(n, size_ + size_ / 2));
    return data();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }
  /// Whether the buffer is a huge-page mapping (false below huge_buffer_min_bytes).
  bool on_huge_pages() const { return data_ && data_.get_deleter().bytes != 0; }

 private:
  struct Free {
    std::size_t bytes = 0;  // of a mapping (0: aligned_alloc)
    void operator()(T* p) const {
      if (bytes) munmap(p, bytes);
      else std::free(p);
    }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace causalqwen
