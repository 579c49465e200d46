/// The Cauchy scale products of a linear map: a Cauchy vector with scales `scale` pushed
/// through W has scales scale' = scale·|W|ᵀ. |W| is cached (`AbsWeightCache`) and rebuilt when
/// W's arena version changes (`Arena::touch()` after an optimiser step or a load) or when
/// `invalidate()` is called.
#pragma once
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace causalqwen::linalg {

/// |W| for one weight matrix, rebuilt only when W (its address, shape or version) changes; held
/// on huge pages when large (the class head's |W_cls| of evaluation and generation: 545 MB for
/// the Qwen2.5-0.5B shape).
template <class T>
class AbsWeightCache {
 public:
  /// |W| [N,K] for W [N,K] at parameter version `version`.
  TensorView<const T, 2> get(TensorView<const T, 2> w, std::uint64_t version) {
    if (!valid_ || w.data != source_ || w.shape != shape_ || version != version_) {
      if (abs_.size() != w.size()) abs_ = PageBuffer<T>(w.size());
      T* out = abs_.data();
      parallel_chunks(w.size(), [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) out[i] = w.data[i] < T(0) ? -w.data[i] : w.data[i];
      });
      source_ = w.data;
      shape_ = w.shape;
      version_ = version;
      valid_ = true;
      ++rebuilds_;
    }
    return TensorView<const T, 2>(abs_.data(), shape_);
  }
  void invalidate() { valid_ = false; }
  /// How many times |W| was recomputed (for tests and diagnostics).
  std::uint64_t rebuilds() const { return rebuilds_; }
  /// Bytes held for |W| (0 before the first get).
  std::size_t bytes() const { return abs_.size() * sizeof(T); }

 private:
  PageBuffer<T> abs_;
  const T* source_ = nullptr;
  Shape<2> shape_{};
  std::uint64_t version_ = 0;
  std::uint64_t rebuilds_ = 0;
  bool valid_ = false;
};

/// scale' = scale·|W|ᵀ:  scale [M,K], |W| = W.abs [N,K], scale' [M,N]  (Format::bf16: both
/// rounded to bf16, |W|'s bf16 values read from W.bf16_copy with the sign bits cleared when W has
/// one: W.abs is then not read).
template <class T>
void abs_linear_forward(TensorView<T, 2> scale_out, TensorView<const T, 2> scale, const Weight<const T>& W) {
  linear_forward<T>(scale_out, scale, W.abs_weight());
}

/// dscale += dscale'·|W|:  dscale' [M,N], |W| = W.abs [N,K], dscale [M,K]  (Format::bf16 likewise).
template <class T>
void abs_linear_backward_input(TensorView<T, 2> dscale, TensorView<const T, 2> dscale_out, const Weight<const T>& W) {
  linear_backward_input<T>(dscale, dscale_out, W.abs_weight());
}

/// dW += sign(W) ⊙ (dscale'ᵀ·scale):  dscale' [M,N], scale [M,K], W and dW [N,K];
/// sign(0) = 0 (the subgradient of |w| at 0 used here). Offered first to `sink` when given.
/// Format::bf16 (W.precision): the product of bf16(dscale')ᵀ·bf16(scale).
template <class T>
void abs_linear_backward_weight(TensorView<T, 2> dw, TensorView<const T, 2> dscale_out,
                                TensorView<const T, 2> scale, const Weight<const T>& W,
                                WeightGradSink<T>* sink = nullptr) {
  const TensorView<const T, 2> w = W.values;
  const Format precision = W.precision;
  const std::size_t m = dscale_out.shape[0], n = dscale_out.shape[1], k = scale.shape[1];
  detail::require(scale.shape[0] == m, "abs_linear_backward_weight",
                  "scale {} does not match dscale' {}", shape_text(scale.shape),
                  shape_text(dscale_out.shape));
  require_shape(w, {n, k}, "abs_linear_backward_weight", "W");
  require_shape(dw, {n, k}, "abs_linear_backward_weight", "dW");
  require_product_format(precision, "abs_linear_backward_weight");
  if (offer_to_weight_grad_sink<T>(sink, dw, dscale_out, scale, w)) return;
  require_precision_fits<T>(precision, "abs_linear_backward_weight");
  // Row tiles of dscale'ᵀ·scale, each masked into dW as it is made: a tile buffer of at most
  // tile_elements, kept per thread, instead of an [N,K] product allocated at every call.
  constexpr std::size_t tile_elements = std::size_t{1} << 20;
  const std::size_t tile_rows = std::max<std::size_t>(1, std::min(n, tile_elements / std::max<std::size_t>(k, 1)));
  thread_local std::vector<T> product;
  if (product.size() < tile_rows * k) product.resize(tile_rows * k);
  for (std::size_t r0 = 0; r0 < n; r0 += tile_rows) {
    const std::size_t rows = std::min(tile_rows, n - r0);
    if constexpr (std::is_same_v<T, float>)
      if (precision == Format::bf16)
        bf16_matmul(Op::transposed, Op::plain, rows, k, m, dscale_out.data + r0, n, scale.data, k, product.data(), k, false);
    if (precision == Format::f32)
      matmul<T>(Op::transposed, Op::plain, rows, k, m, dscale_out.data + r0, n, scale.data, k, product.data(), k, false);
    const T* w_rows = w.data + r0 * k;
    T* dw_rows = dw.data + r0 * k;
    const T* tile = product.data();
    parallel_for(rows, rows * k, [&](std::size_t r) {
      for (std::size_t j = r * k; j < (r + 1) * k; ++j) {
        const T sign_w = w_rows[j] > T(0) ? T(1) : w_rows[j] < T(0) ? T(-1) : T(0);
        dw_rows[j] += sign_w * tile[j];
      }
    });
  }
}

}  // namespace causalqwen::linalg
