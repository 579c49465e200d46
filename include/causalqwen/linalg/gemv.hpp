/// Products of a few rows with a weight matrix read once (the matrix-vector products of
/// decoding, which are bound by the memory traffic of W):
///   y [R,N] = x [R,K]·Wᵀ (+ b)          (few_rows_linear_forward)
///   dot_rows: Σ_j a_j·w_ij and Σ_j s_j·|w_ij| for 4 rows i of W (the vocabulary kernel)
/// A float W is read one row at a time, each row one sequential stream summed by four vector
/// accumulators (four independent FMA chains over consecutive vectors, added pairwise at the
/// end, then reduced horizontally): one stream per row reads closer to the memory's bandwidth than
/// four rows read side by side (four interleaved streams). Each row's sum is formed
/// alone, so grouping rows never changes a result. The rows of W are split over the OpenMP
/// threads in contiguous blocks.
/// W is read from a packed bf16 copy (packed_weight.hpp) instead when one is given: its panels
/// put four rows' next 16 weights side by side (one sequential stream), read by walking a pointer
/// along the panel group and asking for the lines ahead; each weight is widened to float in the
/// register and each row has one vector accumulator per sum (a row's bits, too, do not depend on
/// its group). An int8 copy is read by the integer dot products of int8_dot.hpp instead.
/// Inference only; call outside your own `omp parallel` regions (it then runs serially).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/core/xt.hpp"
#include "causalqwen/linalg/int8_dot.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
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
/// Bytes ahead of its reads at which the kernel walking a bf16 panel group asks for W's next
/// lines, 0 for none. The AVX-512 build asks 1 KiB ahead, which helps it follow the panels; the
/// AVX2 build walks without it, since there the prefetch did not pay (docs/performance/).
#if XSIMD_WITH_AVX512F
inline constexpr std::size_t bf16_prefetch_bytes = 1024;
#else
inline constexpr std::size_t bf16_prefetch_bytes = 0;
#endif

}  // namespace detail_gemv

namespace detail_gemv {

/// The rows of a float matrix (row i at w + i·ld).
template <class T>
struct FloatRows {
  const T* w;
  std::size_t ld;
  FloatRows from(std::size_t r) const { return {w + r * ld, ld}; }
  template <class B>
  B load(std::size_t i, std::size_t j) const { return B::load_unaligned(w + i * ld + j); }
  T at(std::size_t i, std::size_t j) const { return w[i * ld + j]; }
};

/// The rows of a bf16 copy in panels (packed_weight.hpp): a weight widens to the float with its
/// 16 bits on top (exact).
struct Bf16Rows {
  const std::uint16_t* w;  // the panel store
  std::size_t cols_padded, row0;
  Bf16Rows from(std::size_t r) const { return {w, cols_padded, row0 + r}; }
  const std::uint16_t* at_ptr(std::size_t i, std::size_t j) const { return w + panel_index(row0 + i, j, cols_padded); }
  template <class B>
  B load(std::size_t i, std::size_t j) const { return widen<B>(at_ptr(i, j)); }
  /// The B::size weights at p, widened to float.
  template <class B>
  static B widen(const std::uint16_t* p) {
#if XSIMD_WITH_AVX512F
    if constexpr (B::size == 16)
      return B(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
#endif
#if XSIMD_WITH_AVX2
    if constexpr (B::size == 8)
      return B(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
    alignas(64) float lanes[B::size];
    for (std::size_t k = 0; k < B::size; ++k) lanes[k] = bf16_to_float(p[k]);
    return B::load_aligned(lanes);
  }
  float at(std::size_t i, std::size_t j) const { return bf16_to_float(*at_ptr(i, j)); }
};

}  // namespace detail_gemv

/// f(rows) with the reader of W: the bf16 copy when `packed` holds one (float models only),
/// else the float matrix w (int8 copies have kernels of their own: int8_dot.hpp).
template <class T, class F>
void with_weight_rows(TensorView<const T, 2> w, const PackedRef& packed, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    detail::require(!packed.abs, "with_weight_rows", "a copy read as |W| serves the bf16 products only (bf16_gemm.hpp)");
    if (packed.type == Format::bf16) return f(detail_gemv::Bf16Rows{packed.bf16, packed.cols_padded, packed.row0});
    detail::require(packed.type != Format::int8, "with_weight_rows", "int8 copies are read by int8_dot.hpp's kernels");
  } else {
    detail::require(!packed.packed(), "with_weight_rows", "packed {} weights serve float models only",
                    format_name(packed.type));
  }
  f(detail_gemv::FloatRows<T>{w.data, w.shape[1]});
}

/// One float row w [C]: loc = Σ_j a_j·w_j and, when `s` is non-null, scale = Σ_j s_j·|w_j|.
/// Four vector accumulators per sum take consecutive vectors in turn (acc_q over the vectors
/// v ≡ q mod 4), then (acc_0 + acc_1) + (acc_2 + acc_3), a horizontal sum, and the scalar tail.
template <class T>
inline void dot_row_float(const T* w, const T* a, const T* s, std::size_t C, T* loc, T* scale) noexcept {
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size, U = 4;
  B acc_l[U], acc_s[U];
  for (std::size_t u = 0; u < U; ++u) acc_l[u] = acc_s[u] = B(T(0));
  std::size_t j = 0;
  for (; j + U * W <= C; j += U * W) {
#pragma GCC unroll 4
    for (std::size_t u = 0; u < U; ++u) {
      const B wv = B::load_unaligned(w + j + u * W);
      acc_l[u] = xsimd::fma(B::load_unaligned(a + j + u * W), wv, acc_l[u]);
      if (s) acc_s[u] = xsimd::fma(B::load_unaligned(s + j + u * W), xsimd::abs(wv), acc_s[u]);
    }
  }
  for (std::size_t u = 0; j + W <= C; j += W, u = (u + 1) % U) {
    const B wv = B::load_unaligned(w + j);
    acc_l[u] = xsimd::fma(B::load_unaligned(a + j), wv, acc_l[u]);
    if (s) acc_s[u] = xsimd::fma(B::load_unaligned(s + j), xsimd::abs(wv), acc_s[u]);
  }
  const auto total = [](const B* acc) {
#if XSIMD_VERSION_MAJOR >= 9
    return xsimd::reduce_add((acc[0] + acc[1]) + (acc[2] + acc[3]));
#else
    return xsimd::hadd((acc[0] + acc[1]) + (acc[2] + acc[3]));
#endif
  };
  T l = total(acc_l), sc = s ? total(acc_s) : T(0);
  for (; j < C; ++j) {  // the tail, with explicit FMAs: the same rounding whatever the compiler contracts
    l = std::fma(a[j], w[j], l);
    if (s) sc = std::fma(s[j], std::fabs(w[j]), sc);
  }
  *loc = l;
  if (s) *scale = sc;
}

/// For the N (≤ 4) rows of W that `w` starts at, of length C: loc[i] = Σ_j a_j·w_ij and, when
/// `s` is non-null, scale[i] = Σ_j s_j·|w_ij|. Float rows: one at a time (dot_row_float). bf16
/// panels: the N rows side by side, one vector accumulator per row and sum, then a horizontal
/// sum, then the scalar tail.
template <class T, std::size_t N, class Rows>
inline void dot_rows(const Rows& w, const T* a, const T* s, std::size_t C, T* loc, T* scale) noexcept {
  static_assert(N >= 1 && N <= 4);
  static_assert(std::is_same_v<Rows, detail_gemv::FloatRows<T>> || std::is_same_v<T, float>,
                "causalqwen::dot_rows: packed bf16 weights serve float models only.");
  if constexpr (detail_gemv::simd_type<T> && std::is_same_v<Rows, detail_gemv::FloatRows<T>>) {
    for (std::size_t i = 0; i < N; ++i) dot_row_float<T>(w.w + i * w.ld, a, s, C, loc + i, s ? scale + i : nullptr);
    return;
  }
  std::size_t j = 0;
  T l[N] = {}, sc[N] = {};
  if constexpr (detail_gemv::simd_type<T>) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    B acc_l[N], acc_s[N];
    for (std::size_t i = 0; i < N; ++i) acc_l[i] = acc_s[i] = B(T(0));
    // columns [j, j + W) of the N rows, row i's W weights read by weight(i)
    const auto step = [&](std::size_t j, const auto& weight) __attribute__((always_inline)) {
      const B av = B::load_unaligned(a + j);
      if (s) {
        const B sv = B::load_unaligned(s + j);
#pragma GCC unroll 4  // the accumulators then stay in registers
        for (std::size_t i = 0; i < N; ++i) {
          const B wv = weight(i);
          acc_l[i] = xsimd::fma(av, wv, acc_l[i]);
          acc_s[i] = xsimd::fma(sv, xsimd::abs(wv), acc_s[i]);
        }
      } else {
#pragma GCC unroll 4
        for (std::size_t i = 0; i < N; ++i) acc_l[i] = xsimd::fma(av, weight(i), acc_l[i]);
      }
    };
    if constexpr (std::is_same_v<Rows, detail_gemv::Bf16Rows> && N == panel_rows && panel_cols % W == 0) {
      if (w.row0 % panel_rows == 0) {
        // the four rows are one panel group: their weights of each chunk of 16 columns are one
        // contiguous block of 128 bytes (row i's at i·16), read by walking a pointer instead of
        // indexing, with the block's two lines bf16_prefetch_bytes ahead requested (when not 0)
        const std::uint16_t* block = w.at_ptr(0, 0);
        for (; j + panel_cols <= C; j += panel_cols, block += panel_rows * panel_cols) {
          if constexpr (detail_gemv::bf16_prefetch_bytes > 0) {
            const char* ahead = reinterpret_cast<const char*>(block) + detail_gemv::bf16_prefetch_bytes;
            __builtin_prefetch(ahead, 0, 3);
            __builtin_prefetch(ahead + 64, 0, 3);
          }
#pragma GCC unroll 4
          for (std::size_t h = 0; h < panel_cols; h += W)
            step(j + h, [&](std::size_t i) { return detail_gemv::Bf16Rows::widen<B>(block + i * panel_cols + h); });
        }
      }
    }
    for (; j + W <= C; j += W) step(j, [&](std::size_t i) { return w.template load<B>(i, j); });
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
  for (; j < C; ++j)  // the tail, with explicit FMAs: the same rounding whatever the compiler contracts
    for (std::size_t i = 0; i < N; ++i) {
      const T wij = w.at(i, j);
      l[i] = std::fma(a[j], wij, l[i]);
      if (s) sc[i] = std::fma(s[j], std::fabs(wij), sc[i]);
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
/// W is read from `packed` when it holds a bf16 copy, or by int8_linear_forward when it holds an
/// int8 one (w may then be empty), else from w.
/// Any M works (the loop over X's rows is innermost, W's 4-row block staying in cache); it is
/// meant for M ≤ few_rows_max.
template <class T>
void few_rows_linear_forward(TensorView<T, 2> y, TensorView<const T, 2> x, TensorView<const T, 2> w,
                             TensorView<const T, 1> b = {}, const PackedRef& packed = {}) {
  if constexpr (std::is_same_v<T, float>)
    if (packed.type == Format::int8) return int8_linear_forward(y, x, packed, b);
  const std::size_t M = x.shape[0], K = x.shape[1], N = packed.packed() ? packed.rows : w.shape[0];
  const std::size_t WK = packed.packed() ? packed.cols : w.shape[1];
  detail::require(WK == K, "few_rows_linear_forward", "W [{},{}] does not match X {}", N, WK, shape_text(x.shape));
  require_shape(y, {M, N}, "few_rows_linear_forward", "Y");
  if (!b.empty()) require_shape(b, {N}, "few_rows_linear_forward", "b");
  with_weight_rows<T>(w, packed, [&](const auto& rows) {
    for_row_blocks(N, detail_gemv::rows_per_task, N * K, [&](std::size_t n0, std::size_t n1) {
      std::size_t n = n0;
      T out[4];
      for (; n + 4 <= n1; n += 4)
        for (std::size_t m = 0; m < M; ++m) {
          dot_rows<T, 4>(rows.from(n), x.data + m * K, nullptr, K, out, nullptr);
          for (std::size_t i = 0; i < 4; ++i) y.data[m * N + n + i] = out[i] + (b.empty() ? T(0) : b.data[n + i]);
        }
      for (; n < n1; ++n)
        for (std::size_t m = 0; m < M; ++m) {
          dot_rows<T, 1>(rows.from(n), x.data + m * K, nullptr, K, out, nullptr);
          y.data[m * N + n] = out[0] + (b.empty() ? T(0) : b.data[n]);
        }
    });
  });
}

}  // namespace causalqwen::linalg
