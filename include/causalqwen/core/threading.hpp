/// Threading helpers over OpenMP. Elementwise work runs in `parallel_for`; GEMMs are best
/// called outside any `omp parallel` region (linalg::matmul threads them itself only there).
/// A program sets its thread count once with `set_threads`; how idle threads wait (OpenMP's
/// environment, read before main) is the program's choice.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

// OpenBLAS's thread setter, declared weak: it resolves to OpenBLAS's function when the program
// links OpenBLAS (the default build routes Eigen's GEMMs there) and to null otherwise.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

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

/// Sets the n values at p to `value`, split over the threads when n is large (zeroing a gradient
/// buffer on one thread would leave the others waiting).
template <class T>
void parallel_fill(T* p, std::size_t n, T value) {
  parallel_chunks(n, [&](std::size_t begin, std::size_t end) { std::fill(p + begin, p + end, value); });
}

/// Sets OpenBLAS (when the program links it) to one thread and leaves OpenMP's thread count as
/// it was: Debian's OpenMP build of OpenBLAS implements openblas_set_num_threads(1) with
/// omp_set_num_threads(1), which would otherwise put every OpenMP region of the program on one
/// thread. That build keeps a BLAS count of 1 and does not follow OpenMP's count afterwards.
inline void keep_blas_on_one_thread() {
  if (openblas_set_num_threads == nullptr) return;
  const int threads = omp_get_max_threads();
  openblas_set_num_threads(1);
  omp_set_num_threads(threads);
}

/// Sets the library's threads to `threads` (≥ 1; 0 counts as 1) through omp_set_num_threads:
/// parallel_for, the GEMMs (linalg::matmul splits them over the OpenMP threads itself), oneDNN
/// and Eigen. OpenBLAS is told to keep one thread (openblas_set_num_threads, when the program
/// links it): every BLAS call is one block of a product already split, and a pthread build's
/// workers would otherwise spin beside the OpenMP pool. With the BLAS back end, results do not
/// depend on `threads`.
inline void set_threads(std::size_t threads) {
  omp_set_num_threads(static_cast<int>(std::max<std::size_t>(threads, 1)));
  keep_blas_on_one_thread();
}

}  // namespace causalqwen
