/// Threading helpers over OpenMP. Elementwise work runs in `parallel_for`; GEMMs must be
/// called outside any `omp parallel` region (Eigen threads its GEMM itself only there).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace causalqwen {

/// Work below this many elements runs on the calling thread (a fork costs ~µs).
inline constexpr std::size_t parallel_grain = 1 << 15;

/// Calls f(i) for i in [0, n), split statically over the OpenMP threads when `work`
/// (an estimate of the elements touched) is at least `parallel_grain`.
template <class F>
void parallel_for(std::size_t n, std::size_t work, F&& f) {
  const auto count = static_cast<std::int64_t>(n);
  if (work < parallel_grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    for (std::int64_t i = 0; i < count; ++i) f(static_cast<std::size_t>(i));
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) f(static_cast<std::size_t>(i));
}

/// Calls f(begin, end) on contiguous chunks covering [0, n), one per thread for large n.
template <class F>
void parallel_chunks(std::size_t n, F&& f) {
  if (n < parallel_grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    f(std::size_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const auto threads = static_cast<std::size_t>(omp_get_num_threads());
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t chunk = (n + threads - 1) / threads;
    const std::size_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) f(begin, end);
  }
}

}  // namespace causalqwen
