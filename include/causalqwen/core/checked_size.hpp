/// Sizes that allocate, checked: every product or sum of sizes that becomes an allocation goes
/// through checked_mul / checked_add, which refuse (SizeError naming what was being sized) instead
/// of wrapping around 2^64, and require_memory refuses a byte count above the memory available
/// now (MemAvailable in /proc/meminfo, else the physical memory) before the allocation is tried
/// (an overcommitting kernel would grant it and then kill the process as the pages are touched). allocating(what, bytes, f) runs an allocation and turns
/// std::bad_alloc into a SizeError naming what and how much.
///
///   const auto cells = checked_mul(rows, seq, "train batch [B,S]");
///   require_memory(checked_bytes<float>(cells, "train batch [B,S]"), "train batch [B,S]");
#pragma once
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace causalqwen {

/// A size that overflows, or more memory than is available: what was being sized and how much.
class SizeError : public DomainError {
 public:
  using DomainError::DomainError;
};

/// A byte count in readable form: "512 bytes", "3.0 MiB", "16.0 EiB".
inline std::string readable_bytes(double bytes) {
  static constexpr const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  std::size_t u = 0;
  while (bytes >= 1024.0 && u + 1 < std::size(units)) bytes /= 1024.0, ++u;
  return u == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

/// What is being sized: a string, or a callable returning one, called only when a check fails
/// (so that a check on a hot path builds no message and allocates nothing).
template <class What>
concept SizeWhat = std::convertible_to<const What&, std::string_view> || std::is_invocable_v<const What&>;

namespace detail {
template <SizeWhat What>
std::string what_text(const What& what) {
  if constexpr (std::convertible_to<const What&, std::string_view>) return std::string(std::string_view(what));
  else return std::string(what());
}
}  // namespace detail

/// a·b; SizeError when the product passes 2^64 − 1.
template <SizeWhat What>
std::size_t checked_mul(std::size_t a, std::size_t b, const What& what) {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) [[unlikely]]
    throw SizeError(fmt::format("{}: the size {} x {} does not fit in 64 bits (about {:.3g} elements)", detail::what_text(what), a, b,
                                static_cast<double>(a) * static_cast<double>(b)));
  return product;
}

/// a + b; SizeError when the sum passes 2^64 − 1.
template <SizeWhat What>
std::size_t checked_add(std::size_t a, std::size_t b, const What& what) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) [[unlikely]]
    throw SizeError(fmt::format("{}: the size {} + {} does not fit in 64 bits", detail::what_text(what), a, b));
  return sum;
}

/// ∏ factors, checked at every step.
template <SizeWhat What>
std::size_t checked_product(std::initializer_list<std::size_t> factors, const What& what) {
  std::size_t product = 1;
  for (auto f : factors) product = checked_mul(product, f, what);
  return product;
}

/// count · sizeof(T), checked.
template <class T, SizeWhat What>
std::size_t checked_bytes(std::size_t count, const What& what) {
  return checked_mul(count, sizeof(T), what);
}

/// This machine's physical memory in bytes (sysconf); 2^64 − 1 when it cannot be told.
inline std::size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::size_t>::max();
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(pages), static_cast<std::size_t>(page), &bytes))
    return std::numeric_limits<std::size_t>::max();
  return bytes;
}

/// MemAvailable of a /proc/meminfo text ("MemAvailable:   21909100 kB"), in bytes = kB · 1024;
/// nullopt when the line is absent, malformed or its value passes 2^64 − 1 bytes.
inline std::optional<std::size_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  std::size_t at = meminfo.find(key);
  while (at != std::string_view::npos && at != 0 && meminfo[at - 1] != '\n') at = meminfo.find(key, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + key.size();
  while (i < meminfo.size() && meminfo[i] == ' ') ++i;
  std::size_t kib = 0;
  const std::size_t first_digit = i;
  for (; i < meminfo.size() && meminfo[i] >= '0' && meminfo[i] <= '9'; ++i)
    if (__builtin_mul_overflow(kib, std::size_t{10}, &kib) || __builtin_add_overflow(kib, std::size_t(meminfo[i] - '0'), &kib))
      return std::nullopt;
  if (i == first_digit || meminfo.substr(i, 3) != " kB") return std::nullopt;
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(kib, std::size_t{1024}, &bytes)) return std::nullopt;
  return bytes;
}

/// The memory a process may take now, and what the figure is.
struct AvailableMemory {
  std::size_t bytes = std::numeric_limits<std::size_t>::max();
  bool available_now = false;  ///< true: MemAvailable; false: physical memory (or 2^64 − 1 when unknown)
};

/// The memory available now: MemAvailable of `meminfo_path` (the kernel's estimate of what can be
/// allocated without swapping), else this machine's physical memory. Read with one open/read into
/// a stack buffer: no allocation, about as cheap as a system call, so a check on a hot path may
/// call it once per decision.
inline AvailableMemory available_memory(const char* meminfo_path = "/proc/meminfo") {
  char text[4096];
  std::size_t used = 0;
  const int fd = ::open(meminfo_path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    for (ssize_t got; used < sizeof text && (got = ::read(fd, text + used, sizeof text - used)) > 0;)
      used += static_cast<std::size_t>(got);
    ::close(fd);
  }
  if (const auto bytes = parse_mem_available(std::string_view(text, used))) return {*bytes, true};
  return {physical_memory_bytes(), false};
}

/// SizeError when `bytes` exceed `have` (the memory available now), naming what, the bytes
/// needed and the bytes available: "<what> needs 1.0 TiB (1099511627776 bytes), more than the
/// 15.6 GiB (16750372864 bytes) of memory available now".
template <SizeWhat What>
void require_memory(std::size_t bytes, const What& what, const AvailableMemory& have) {
  if (bytes > have.bytes) [[unlikely]]
    throw SizeError(fmt::format("{} needs {} ({} bytes), more than the {} ({} bytes) of {}", detail::what_text(what),
                                readable_bytes(static_cast<double>(bytes)), bytes,
                                readable_bytes(static_cast<double>(have.bytes)), have.bytes,
                                have.available_now ? "memory available now" : "this machine's physical memory"));
}

/// require_memory against available_memory(), read once for this decision.
template <SizeWhat What>
void require_memory(std::size_t bytes, const What& what) {
  require_memory(bytes, what, available_memory());
}

/// count · sizeof(T) bytes for `what`, checked for overflow and against the memory available now.
template <class T, SizeWhat What>
std::size_t require_elements(std::size_t count, const What& what) {
  const auto bytes = checked_bytes<T>(count, what);
  require_memory(bytes, what);
  return bytes;
}

/// f() (an allocation of about `bytes` for `what`), with std::bad_alloc turned into a SizeError
/// that names what and how much.
template <class F>
decltype(auto) allocating(std::string_view what, std::size_t bytes, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw SizeError(fmt::format("{}: cannot allocate {} ({} bytes)", what, readable_bytes(static_cast<double>(bytes)),
                                bytes));
  }
}

}  // namespace causalqwen
