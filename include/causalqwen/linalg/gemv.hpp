/// Products of a few rows with a weight matrix read once (the matrix-vector products of
/// decoding, which are bound by the memory traffic of W):
///   y [R,N] = x [R,K]·Wᵀ (+ b)          (few_rows_linear_forward)
///   dot_rows: Σ_j a_j·w_ij and Σ_j s_j·|w_ij| for 4 rows i of W at once (the vocabulary kernel)
/// Four rows of W are read side by side, each with its own vector accumulator (four independent
/// FMA chains and four streams for the prefetcher), then reduced horizontally; every row's sum is
/// formed exactly as by a single-row loop (one accumulator per row), so the grouping never
/// changes a result. The rows of W are split over the OpenMP threads in contiguous blocks.
/// Inference only; call outside your own `omp parallel` regions (it then runs serially).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/core/xt.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

namespace causalqwen::linalg {

/// Rows of x up to which few_rows_linear_forward is meant to be used (beyond, a GEMM reuses W
/// from cache and wins).
inline constexpr std::size_t few_rows_max = 8;

namespace detail_gemv {

template <class T>
inline constexpr bool simd_type = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Rows of W handed to one task of the thread split (a multiple of 4).
inline constexpr std::size_t rows_per_task = 64;

}  // namespace detail_gemv

/// For the N (≤ 4) rows w + i·ldw of length C: loc[i] = Σ_j a_j·w_ij and, when `s` is non-null,
/// scale[i] = Σ_j s_j·|w_ij| (vector accumulators, one per row and sum, then a horizontal sum,
/// then the scalar tail).
template <class T, std::size_t N>
inline void dot_rows(const T* w, std::size_t ldw, const T* a, const T* s, std::size_t C, T* loc,
                     T* scale) noexcept {
  static_assert(N >= 1 && N <= 4);
  std::size_t j = 0;
  T l[N] = {}, sc[N] = {};
  if constexpr (detail_gemv::simd_type<T>) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    B acc_l[N], acc_s[N];
    for (std::size_t i = 0; i < N; ++i) acc_l[i] = acc_s[i] = B(T(0));
    if (s) {
      for (; j + W <= C; j += W) {
        const B av = B::load_unaligned(a + j), sv = B::load_unaligned(s + j);
        for (std::size_t i = 0; i < N; ++i) {
          const B wv = B::load_unaligned(w + i * ldw + j);
          acc_l[i] = xsimd::fma(av, wv, acc_l[i]);
          acc_s[i] = xsimd::fma(sv, xsimd::abs(wv), acc_s[i]);
        }
      }
    } else {
      for (; j + W <= C; j += W) {
        const B av = B::load_unaligned(a + j);
        for (std::size_t i = 0; i < N; ++i) acc_l[i] = xsimd::fma(av, B::load_unaligned(w + i * ldw + j), acc_l[i]);
      }
    }
    for (std::size_t i = 0; i < N; ++i) {
#if XSIMD_VERSION_MAJOR >= 9
      l[i] = xsimd::reduce_add(acc_l[i]);
      if (s) sc[i] = xsimd::reduce_add(acc_s[i]);
#else
      l[i] = xsimd::hadd(acc_l[i]);
      if (s) sc[i] = xsimd::hadd(acc_s[i]);
#endif
    }
  }
  for (; j < C; ++j)
    for (std::size_t i = 0; i < N; ++i) {
      l[i] += a[j] * w[i * ldw + j];
      if (s) sc[i] += s[j] * std::fabs(w[i * ldw + j]);
    }
  for (std::size_t i = 0; i < N; ++i) {
    loc[i] = l[i];
    if (s) scale[i] = sc[i];
  }
}

/// Calls f(n0, n1) on blocks of `rows_per_task` rows (a multiple of 4) covering [0, n), split
/// statically over the threads when `work` (elements read) reaches parallel_grain.
template <class F>
void for_row_blocks(std::size_t n, std::size_t rows_per_task, std::size_t work, F&& f) {
  const std::size_t tasks = (n + rows_per_task - 1) / rows_per_task;
  parallel_for(tasks, work, [&](std::size_t t) { f(t * rows_per_task, std::min(n, (t + 1) * rows_per_task)); });
}

/// Y = X·Wᵀ (+ b) for a few rows of X, reading W once:  X [M,K], W [N,K], b [N] (optional), Y [M,N].
/// Any M works (the loop over X's rows is innermost, W's 4-row block staying in cache); it is
/// meant for M ≤ few_rows_max.
template <class T>
void few_rows_linear_forward(TensorView<T, 2> y, TensorView<const T, 2> x, TensorView<const T, 2> w,
                             TensorView<const T, 1> b = {}) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  detail::require(w.shape[1] == K, "few_rows_linear_forward", "W {} does not match X {}", shape_string(w.shape),
                  shape_string(x.shape));
  require_shape(y, {M, N}, "few_rows_linear_forward", "Y");
  if (!b.empty()) require_shape(b, {N}, "few_rows_linear_forward", "b");
  for_row_blocks(N, detail_gemv::rows_per_task, N * K, [&](std::size_t n0, std::size_t n1) {
    std::size_t n = n0;
    T out[4];
    for (; n + 4 <= n1; n += 4)
      for (std::size_t m = 0; m < M; ++m) {
        dot_rows<T, 4>(w.data + n * K, K, x.data + m * K, nullptr, K, out, nullptr);
        for (std::size_t i = 0; i < 4; ++i) y.data[m * N + n + i] = out[i] + (b.empty() ? T(0) : b.data[n + i]);
      }
    for (; n < n1; ++n)
      for (std::size_t m = 0; m < M; ++m) {
        dot_rows<T, 1>(w.data + n * K, K, x.data + m * K, nullptr, K, out, nullptr);
        y.data[m * N + n] = out[0] + (b.empty() ? T(0) : b.data[n]);
      }
  });
}

}  // namespace causalqwen::linalg
