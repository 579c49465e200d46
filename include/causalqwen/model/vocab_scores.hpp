/// The vocabulary products of a few decoding rows, reading the class weights once:
///   loc_S [R,K] = loc_A [R,C]·W_clsᵀ + b_cls      scale_S [R,K] = scale_A [R,C]·|W_cls|ᵀ
/// For R ≤ fused_rows_max one pass over W_cls computes both products (decoding is bound by the
/// memory traffic of W_cls, 151,666 × 896 for Qwen2.5-0.5B, so reading it once instead of W and a
/// cached |W| halves the head's traffic), four classes side by side (linalg::dot_rows, split over
/// the threads); larger R use the GEMM wrappers with an |W| cache.
#pragma once
#include "causalqwen/core/threading.hpp"
#include "causalqwen/core/xt.hpp"
#include "causalqwen/linalg/abs_weight.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/gemv.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace causalqwen::model {

/// Rows up to which the fused single-pass kernel is used.
inline constexpr std::size_t fused_rows_max = 16;

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
  // one task = 256 classes; within it, blocks of 4 rows of W_cls are read once for all R rows
  linalg::for_row_blocks(K, 256, K * C, [&](std::size_t k0, std::size_t k1) {
    T l[4], s[4];
    auto store = [&](std::size_t r, std::size_t k, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) {
        loc_S.data[r * K + k + i] = l[i] + (b.empty() ? T(0) : b[k + i]);
        if (with_scale) scale_S.data[r * K + k + i] = s[i];
      }
    };
    std::size_t k = k0;
    for (; k + 4 <= k1; k += 4)
      for (std::size_t r = 0; r < R; ++r) {
        linalg::dot_rows<T, 4>(W.data + k * C, C, loc_A.data + r * C, with_scale ? scale_A.data + r * C : nullptr, C,
                               l, s);
        store(r, k, 4);
      }
    for (; k < k1; ++k)
      for (std::size_t r = 0; r < R; ++r) {
        linalg::dot_rows<T, 1>(W.data + k * C, C, loc_A.data + r * C, with_scale ? scale_A.data + r * C : nullptr, C,
                               l, s);
        store(r, k, 1);
      }
  });
}

}  // namespace causalqwen::model
