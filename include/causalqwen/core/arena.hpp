/// Arenas, llm.c style: one allocation holding many named tensors ("slots"). A `Layout` lists
/// the slots (name, shape, offset); an `Arena<T>` is one aligned buffer laid out by a Layout.
/// Parameters, gradients and optimiser moments share one Layout, so zero-grad, optimiser steps,
/// parameter counts and checkpoint I/O are plain loops over `layout().slots()` or over `span()`.
#pragma once
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace causalqwen {

/// How a slot is placed: `aligned` starts at the next 64-byte boundary; `packed` starts right
/// after the previous slot, so consecutive packed slots form one contiguous block (e.g. the
/// q, k and v projection weights read by one fused GEMM).
enum class Placement { aligned, packed };

/// The named slots of an arena, in order. Offsets are in elements.
class Layout {
 public:
  struct Slot {
    std::string name;
    std::vector<std::size_t> shape;
    std::size_t offset = 0;  // elements from the start of the arena
    std::size_t size = 0;    // elements
  };

  explicit Layout(std::size_t alignment_elements = 16) : align_(alignment_elements) {}

  /// Appends a slot and returns its index. Names are unique.
  std::size_t add(std::string name, std::vector<std::size_t> shape,
                  Placement placement = Placement::aligned) {
    detail::require(!index_.contains(name), "Layout::add", "duplicate slot name '{}'", name);
    const auto what = [&] { return fmt::format("arena slot '{}'", name); };
    std::size_t size = 1;
    for (auto e : shape) size = checked_mul(size, e, what());
    std::size_t offset = total_;
    if (placement == Placement::aligned) offset = checked_add(total_, align_ - 1, what()) / align_ * align_;
    checked_add(offset, size, what());
    index_.emplace(name, slots_.size());
    slots_.push_back(Slot{std::move(name), std::move(shape), offset, size});
    total_ = offset + size;
    return slots_.size() - 1;
  }

  const std::vector<Slot>& slots() const { return slots_; }
  bool contains(const std::string& name) const { return index_.contains(name); }
  const Slot& slot(const std::string& name) const {
    auto it = index_.find(name);
    detail::require(it != index_.end(), "Layout::slot", "no slot named '{}'", name);
    return slots_[it->second];
  }
  /// Elements spanned by the arena (slots plus alignment padding).
  std::size_t total() const { return total_; }
  /// Elements held by the slots themselves (e.g. the parameter count).
  std::size_t count() const {
    std::size_t n = 0;
    for (const auto& s : slots_) n += s.size;
    return n;
  }
  std::size_t alignment() const { return align_; }

 private:
  std::size_t align_;
  std::size_t total_ = 0;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, std::size_t> index_;
};

/// Elements [begin, end) of an arena: the part of the parameters one process owns when the
/// optimiser state is split over several (see shard_ranges).
struct ElementRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
  bool contains(std::size_t i) const { return i >= begin && i < end; }
  /// The intersection with [offset, offset + n) (empty when they do not meet: begin == end).
  ElementRange intersect(std::size_t offset, std::size_t n) const {
    const std::size_t b = std::max(begin, offset), e = std::min(end, offset + n);
    return b < e ? ElementRange{b, e} : ElementRange{b, b};
  }
};

/// [0, total) cut into `parts` consecutive ranges of nearly equal size, each boundary a multiple
/// of `align` elements: range r is part r's. Every element belongs to exactly one range.
inline std::vector<ElementRange> shard_ranges(std::size_t total, std::size_t parts, std::size_t align = 16) {
  detail::require(parts > 0 && align > 0, "shard_ranges", "need parts > 0 and align > 0");
  std::vector<ElementRange> out(parts);
  const std::size_t blocks = (total + align - 1) / align;
  for (std::size_t r = 0; r < parts; ++r) {
    out[r].begin = std::min(total, blocks * r / parts * align);
    out[r].end = std::min(total, blocks * (r + 1) / parts * align);
  }
  return out;
}

/// How an arena's memory is obtained.
///   filled      every element written with 0 (resident at once); from aligned_alloc, or, from
///               4 MiB up, an anonymous mapping aligned to 2 MiB and offered to the kernel's
///               transparent huge pages (madvise): one page fault per 2 MiB instead of per
///               4 KiB, which on a virtual machine makes building a 0.5B model's arenas
///               (parameters, gradients, moments) about twice as fast
///   on_demand   anonymous mmap: a page becomes resident only when first written, and zero()
///               writes 0 over the resident pages only (mincore), keeping them: an arena of
///               which only a few slots are ever written costs only those slots' memory (the
///               gradient arena of optim::StreamingAdamW, whose large weight gradients never
///               land in it), and zeroing it costs no page fault at the next write
enum class ArenaMemory { filled, on_demand };

/// One zero-initialised, 64-byte-aligned allocation laid out by a Layout.
template <class T>
class Arena {
 public:
  Arena() = default;
  explicit Arena(std::shared_ptr<const Layout> layout, ArenaMemory memory = ArenaMemory::filled)
      : memory_(memory) {
    reset(std::move(layout));
  }

  /// Re-lays the arena out (reallocating only when it must grow) and zeroes it.
  void reset(std::shared_ptr<const Layout> layout) {
    layout_ = std::move(layout);
    std::size_t n = std::max<std::size_t>(layout_->total(), 1);
    if (n > capacity_) {
      const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      const std::size_t wanted = checked_bytes<T>(n, "Arena::reset");
      const bool huge = memory_ == ArenaMemory::filled && wanted >= huge_buffer_min_bytes;
      const std::size_t align = memory_ == ArenaMemory::on_demand ? page : huge ? huge_page_bytes : 64;
      const std::size_t bytes = checked_add(wanted, align - 1, "Arena::reset") / align * align;
      if (memory_ == ArenaMemory::filled) require_memory(bytes, fmt::format("an arena of {} elements", n));
      buffer_.reset();
      if (memory_ == ArenaMemory::on_demand) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        detail::require(p != MAP_FAILED, "Arena::reset", "cannot map {} bytes", bytes);
        buffer_ = std::unique_ptr<T, Free>(static_cast<T*>(p), Free{bytes});
      } else if (huge) {
        buffer_ = std::unique_ptr<T, Free>(static_cast<T*>(map_huge_pages(bytes, "Arena::reset")), Free{bytes});
      } else {
        buffer_ = std::unique_ptr<T, Free>(static_cast<T*>(std::aligned_alloc(64, bytes)), Free{0});
        detail::require(buffer_ != nullptr, "Arena::reset", "cannot allocate {} bytes", bytes);
      }
      capacity_ = bytes / sizeof(T);
    }
    zero();
  }

  ArenaMemory memory() const { return memory_; }

  /// True when no page overlapping elements [offset, offset + count) of an on_demand arena has
  /// been written since it was mapped, so they are all 0 without being read (mincore); always
  /// false for a filled arena.
  bool untouched(std::size_t offset, std::size_t count) const {
    if (memory_ != ArenaMemory::on_demand || count == 0) return memory_ == ArenaMemory::on_demand;
    bool written = false;  // (a failed mincore reports the whole range written)
    for_each_written_run(offset, count, [&](std::size_t, std::size_t) { written = true; });
    return !written;
  }

  /// f(begin, end) for each run of elements within [offset, offset + count) whose pages have
  /// been written (on_demand; one mincore call), in increasing order; the whole range for a
  /// filled arena. Reading only these leaves the other pages unmapped: on some kernels even a
  /// read of a never-written anonymous page makes it resident.
  template <class F>
  void for_each_written_run(std::size_t offset, std::size_t count, F&& f) const {
    if (count == 0) return;
    if (memory_ != ArenaMemory::on_demand) return f(offset, offset + count);
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const auto base = reinterpret_cast<std::uintptr_t>(data());
    const std::uintptr_t first = (base + offset * sizeof(T)) / page * page;
    const std::uintptr_t last = base + (offset + count) * sizeof(T);
    thread_local std::vector<unsigned char> resident;  // grows only
    const std::size_t pages = (last - first + page - 1) / page;
    if (resident.size() < pages) resident.resize(pages);
    if (mincore(reinterpret_cast<void*>(first), last - first, resident.data()) != 0) return f(offset, offset + count);
    // element index of the start of page p, clipped to the range
    const auto element_at = [&](std::size_t p) {
      const std::uintptr_t at = first + p * page;
      return at <= base + offset * sizeof(T) ? offset : std::min(offset + count, (at - base) / sizeof(T));
    };
    for (std::size_t p = 0; p < pages;) {
      if (!(resident[p] & 1)) {
        ++p;
        continue;
      }
      std::size_t q = p;
      while (q < pages && (resident[q] & 1)) ++q;
      f(element_at(p), element_at(q));
      p = q;
    }
  }

  const Layout& layout() const { return *layout_; }
  std::shared_ptr<const Layout> shared_layout() const { return layout_; }
  T* data() { return buffer_.get(); }
  const T* data() const { return buffer_.get(); }
  std::size_t size() const { return layout_ ? layout_->total() : 0; }
  std::size_t bytes() const { return capacity_ * sizeof(T); }
  std::span<T> span() { return {data(), size()}; }
  std::span<const T> span() const { return {data(), size()}; }
  void zero() {
    if (memory_ == ArenaMemory::on_demand && buffer_) {
      zero_resident_pages();
      return;
    }
    std::fill(data(), data() + size(), T(0));
  }

  /// The named slot as a rank-N view; N must equal the slot's rank.
  template <std::size_t N>
  TensorView<T, N> view(const std::string& name) {
    const auto& s = layout_->slot(name);
    detail::require(s.shape.size() == N, "Arena::view", "slot '{}' has rank {}, asked for {}",
                    name, s.shape.size(), N);
    Shape<N> shape{};
    std::copy(s.shape.begin(), s.shape.end(), shape.begin());
    return TensorView<T, N>(data() + s.offset, shape);
  }
  template <std::size_t N>
  TensorView<const T, N> view(const std::string& name) const {
    return const_cast<Arena*>(this)->template view<N>(name);
  }
  /// The named slot as a flat span.
  std::span<T> slot_span(const std::string& name) {
    const auto& s = layout_->slot(name);
    return {data() + s.offset, s.size};
  }

  /// Parameter generation: bumped by `touch()` after the values change (optimiser step,
  /// checkpoint load) so caches derived from the values (|W|) know to rebuild.
  std::uint64_t version() const { return version_; }
  void touch() { ++version_; }

 private:
  struct Free {
    std::size_t bytes = 0;  // of an mmap'ed buffer (0: aligned_alloc)
    void operator()(T* p) const {
      if (bytes) munmap(p, bytes);
      else std::free(p);
    }
  };

  ArenaMemory memory_ = ArenaMemory::filled;
  std::shared_ptr<const Layout> layout_;
  /// 0 over every resident page of an on_demand buffer that holds something else (a page only
  /// read is the kernel's shared zero page: writing it would give it memory of its own).
  void zero_resident_pages() {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), bytes = buffer_.get_deleter().bytes;
    const std::size_t pages = bytes / page;
    thread_local std::vector<unsigned char> resident;  // grows only
    if (resident.size() < pages) resident.resize(pages);
    auto* base = reinterpret_cast<unsigned char*>(buffer_.get());
    detail::require(mincore(base, bytes, resident.data()) == 0, "Arena::zero", "mincore failed on a {}-byte arena", bytes);
    for (std::size_t p = 0; p < pages; ++p) {
      if (!(resident[p] & 1)) continue;
      unsigned char* start = base + p * page;
      unsigned char any = 0;
      for (std::size_t b = 0; b < page; ++b) any |= start[b];
      if (any != 0) std::memset(start, 0, page);
    }
  }

  std::unique_ptr<T, Free> buffer_;
  std::size_t capacity_ = 0;
  std::uint64_t version_ = 0;
};

}  // namespace causalqwen
