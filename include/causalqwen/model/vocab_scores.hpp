/// The vocabulary products of a few decoding rows, reading the class weights once:
///   loc_S [R,K] = loc_A [R,C]·W_clsᵀ + b_cls      scale_S [R,K] = scale_A [R,C]·|W_cls|ᵀ
/// For R ≤ fused_rows_max one pass over W_cls computes both products (decoding is bound by the
/// memory traffic of W_cls, 151,666 × 896 for Qwen2.5-0.5B, so reading it once instead of W and a
/// cached |W| halves the head's traffic); larger R use the GEMM wrappers with an |W| cache.
#pragma once
#include "causalqwen/core/threading.hpp"
#include "causalqwen/core/xt.hpp"
#include "causalqwen/linalg/abs_weight.hpp"
#include "causalqwen/linalg/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace causalqwen::model {

/// Rows up to which the fused single-pass kernel is used.
inline constexpr std::size_t fused_rows_max = 16;

namespace detail_vocab {

/// Σ_j a_j·w_j and Σ_j s_j·|w_j| over C entries (s may be null: only the first sum).
template <class T>
inline void dot_pair(const T* w, const T* a, const T* s, std::size_t C, T& loc, T& scale) noexcept {
  std::size_t j = 0;
  T l = 0, sc = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    B acc_l(T(0)), acc_s(T(0));
    for (; j + W <= C; j += W) {
      const B wv = B::load_unaligned(w + j);
      acc_l = xsimd::fma(B::load_unaligned(a + j), wv, acc_l);
      if (s) acc_s = xsimd::fma(B::load_unaligned(s + j), xsimd::abs(wv), acc_s);
    }
#if XSIMD_VERSION_MAJOR >= 9
    l = xsimd::reduce_add(acc_l);
    if (s) sc = xsimd::reduce_add(acc_s);
#else
    l = xsimd::hadd(acc_l);
    if (s) sc = xsimd::hadd(acc_s);
#endif
  }
  for (; j < C; ++j) {
    l += a[j] * w[j];
    if (s) sc += s[j] * std::fabs(w[j]);
  }
  loc = l;
  scale = sc;
}

}  // namespace detail_vocab

/// Computes loc_S (and scale_S when `scale_A` is non-empty) for R rows; see the file comment.
/// W [K,C], b [K]; loc_A, scale_A [R,C]; loc_S, scale_S [R,K]. `abs_cache` serves the GEMM path.
template <class T>
void vocab_scores(TensorView<const T, 2> W, TensorView<const T, 1> b, std::uint64_t version,
                  TensorView<const T, 2> loc_A, TensorView<const T, 2> scale_A, TensorView<T, 2> loc_S,
                  TensorView<T, 2> scale_S, linalg::AbsWeightCache<T>& abs_cache) {
  const std::size_t K = W.shape[0], C = W.shape[1], R = loc_A.shape[0];
  require_shape(loc_A, {R, C}, "vocab_scores", "loc_A");
  require_shape(loc_S, {R, K}, "vocab_scores", "loc_S");
  const bool with_scale = !scale_A.empty();
  if (with_scale) {
    require_shape(scale_A, {R, C}, "vocab_scores", "scale_A");
    require_shape(scale_S, {R, K}, "vocab_scores", "scale_S");
  }
  if (R > fused_rows_max) {
    linalg::linear_forward<T>(loc_S, loc_A, W, b);
    if (with_scale) linalg::abs_linear_forward<T>(scale_S, scale_A, abs_cache.get(W, version));
    return;
  }
  constexpr std::size_t rows_per_task = 256;
  const std::size_t tasks = (K + rows_per_task - 1) / rows_per_task;
  parallel_for(tasks, K * C, [&](std::size_t t) {
    const std::size_t k0 = t * rows_per_task, k1 = std::min(K, k0 + rows_per_task);
    for (std::size_t k = k0; k < k1; ++k) {
      const T* w = W.data + k * C;
      for (std::size_t r = 0; r < R; ++r) {
        T l, s;
        detail_vocab::dot_pair(w, loc_A.data + r * C, with_scale ? scale_A.data + r * C : nullptr, C, l, s);
        loc_S.data[r * K + k] = l + (b.empty() ? T(0) : b[k]);
        if (with_scale) scale_S.data[r * K + k] = s;
      }
    }
  });
}

}  // namespace causalqwen::model
