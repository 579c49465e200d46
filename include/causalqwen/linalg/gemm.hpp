/// The products of a linear layer and their backward, on `matmul` (matmul.hpp, which says
/// which back end runs them). All shapes are checked; gradients accumulate (+=).
/// Call these outside your own `omp parallel` regions: the back ends thread the product.
#pragma once
#include "causalqwen/core/eigen_map.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/bf16_gemm.hpp"
#include "causalqwen/linalg/gemv.hpp"
#include "causalqwen/linalg/kernels/onednn_bf16.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/weight.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace causalqwen::linalg {

namespace detail_gemm {
inline auto ix(std::size_t n) { return static_cast<std::ptrdiff_t>(n); }
}  // namespace detail_gemm

/// Refuses a precision that is not an arithmetic of training products (int8), and Format::bf16
/// for a map that is not float.
template <class T>
void require_precision_fits(Format precision, const char* fn) {
  require_product_format(precision, fn);
  detail::require(std::is_same_v<T, float> || precision == Format::f32, fn, "bf16 products serve float models only");
}

/// Y[m,:] += b for every row m (nothing when b is empty):  Y [M,N], b [N].
template <class T>
void add_bias_rows(TensorView<T, 2> y, TensorView<const T, 1> b) {
  if (b.empty()) return;
  const std::size_t n = y.shape[1];
  parallel_for(y.shape[0], y.size(), [&](std::size_t r) {
    T* row = y.data + r * n;
    for (std::size_t j = 0; j < n; ++j) row[j] += b.data[j];
  });
}

/// Y = X·Wᵀ (+ b):  X [M,K], W [N,K], b [N] (optional: empty view), Y [M,N].
/// In f32 (W.precision), when W has a bf16 decoding copy (W.decode), every row count runs on the
/// bf16 product (bf16_gemm.hpp: Y = bf16(X)·Wᵀ, a row's bits independent of M). Otherwise up to
/// few_rows_max rows (a decoding step) W is read once by the few-rows kernel (gemv.hpp), from
/// W.decode when it is an int8 copy; more rows with an int8 copy run Y = s ⊙ (bf16(X)·Qᵀ) on
/// the bf16 product where int8_rows_on_bf16() says so (AVX512-BF16); more rows otherwise use the
/// GEMM over the float W.values (q·s for an int8 copy), which reuses W from cache.
/// Format::bf16 (float only): Y = bf16(X)·bf16(W)ᵀ (+ b), X rounded in this call, and W too
/// unless W.bf16_copy holds it (mixed-precision training's, kept current by the optimiser: the
/// same values, one pass over the weights fewer); the decoding copy is not read.
/// From onednn_min_rows rows on, where bf16_products_on_onednn() (by default: built with oneDNN,
/// on a CPU where it runs AMX), the products with a bf16 or int8 copy and those of
/// Format::bf16 run on oneDNN's matmul instead (kernels/onednn_bf16.hpp: the same
/// formulas, sums in oneDNN's order; int8 with X quantised per row).
template <class T>
void linear_forward(TensorView<T, 2> y, TensorView<const T, 2> x, const Weight<const T>& W, TensorView<const T, 1> b = {}) {
  const TensorView<const T, 2> w = W.values;
  const PackedRef& packed = W.product_copy();
  const Format precision = W.precision;
  const std::size_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  detail::require(w.shape[1] == k, "linear_forward", "W {} does not match X {}",
                  shape_text(w.shape), shape_text(x.shape));
  require_shape(y, {m, n}, "linear_forward", "Y");
  if (!b.empty()) require_shape(b, {n}, "linear_forward", "b");
  require_precision_fits<T>(precision, "linear_forward");
  if constexpr (std::is_same_v<T, float>) {
    if (precision == Format::bf16) {
      bf16_matmul_rows(Op::plain, Op::transposed, m, n, k, x.data, k, w.data, k, y.data, n, false, packed);
      add_bias_rows(y, b);
      return;
    }
    if (packed_rows_on_onednn(m, packed)) return onednn_packed_linear_forward(y, x, packed, b);
    if (packed.type == Format::bf16) return bf16_linear_forward(y, x, packed, b);
    if (packed.type == Format::int8 && m > few_rows_max && int8_rows_on_bf16())
      return int8_rows_linear_forward(y, x, packed, b);
  }
  if constexpr (detail_gemv::simd_type<T>)
    if (m <= few_rows_max) return few_rows_linear_forward<T>(y, x, w, b, packed);
  matmul<T>(Op::plain, Op::transposed, m, n, k, x.data, k, w.data, k, y.data, n, false);
  add_bias_rows(y, b);
}

/// dX += dY·W:  dY [M,N], W [N,K], dX [M,K]  (Format::bf16: bf16(dY)·bf16(W), bf16(W) read
/// from W.bf16_copy when it has one; the decoding copy is not read).
template <class T>
void linear_backward_input(TensorView<T, 2> dx, TensorView<const T, 2> dy, const Weight<const T>& W) {
  const TensorView<const T, 2> w = W.values;
  const Format precision = W.precision;
  const std::size_t m = dy.shape[0], n = dy.shape[1], k = w.shape[1];
  detail::require(w.shape[0] == n, "linear_backward_input", "W {} does not match dY {}",
                  shape_text(w.shape), shape_text(dy.shape));
  require_shape(dx, {m, k}, "linear_backward_input", "dX");
  require_precision_fits<T>(precision, "linear_backward_input");
  if constexpr (std::is_same_v<T, float>)
    if (precision == Format::bf16)
      return bf16_matmul_rows(Op::plain, Op::plain, m, k, n, dy.data, n, w.data, k, dx.data, k, true, W.backward_copy());
  matmul<T>(Op::plain, Op::plain, m, k, n, dy.data, n, w.data, k, dx.data, k, true);
}

/// dW += dYᵀ·X:  dY [M,N], X [M,K], dW [N,K]. (Offered first to `sink` when given, which may
/// keep dY and X instead, and forms the product in float later: weight_grad_sink.hpp.)
/// Format::bf16: bf16(dY)ᵀ·bf16(X).
template <class T>
void linear_backward_weight(TensorView<T, 2> dw, TensorView<const T, 2> dy,
                            TensorView<const T, 2> x, WeightGradSink<T>* sink = nullptr,
                            Format precision = Format::f32) {
  const std::size_t m = dy.shape[0], n = dy.shape[1], k = x.shape[1];
  detail::require(x.shape[0] == m, "linear_backward_weight", "X {} does not match dY {}",
                  shape_text(x.shape), shape_text(dy.shape));
  require_shape(dw, {n, k}, "linear_backward_weight", "dW");
  require_product_format(precision, "linear_backward_weight");
  if (offer_to_weight_grad_sink<T>(sink, dw, dy, x)) return;
  require_precision_fits<T>(precision, "linear_backward_weight");
  if constexpr (std::is_same_v<T, float>)
    if (precision == Format::bf16)
      return bf16_matmul_rows(Op::transposed, Op::plain, n, k, m, dy.data, n, x.data, k, dw.data, k, true);
  matmul<T>(Op::transposed, Op::plain, n, k, m, dy.data, n, x.data, k, dw.data, k, true);
}

/// db += colsum(dY):  dY [M,N], db [N]. Each column is summed row after row, in order: the
/// result does not depend on where the buffers sit in memory (Eigen's colwise().sum() chooses
/// its summation order by the pointer's alignment, which broke bit-exact resumes) nor on the
/// threads, which take blocks of 64 columns each.
template <class T>
void bias_backward(TensorView<T, 1> db, TensorView<const T, 2> dy) {
  const std::size_t m = dy.shape[0], n = dy.shape[1];
  require_shape(db, {n}, "bias_backward", "db");
  constexpr std::size_t block = 64;
  parallel_for((n + block - 1) / block, m * n, [&](std::size_t b) {
    const std::size_t j0 = b * block, width = std::min(block, n - j0);
    T sum[block] = {};
    for (std::size_t r = 0; r < m; ++r) {
      const T* row = dy.data + r * n + j0;
      for (std::size_t j = 0; j < width; ++j) sum[j] += row[j];
    }
    for (std::size_t j = 0; j < width; ++j) db.data[j0 + j] += sum[j];
  });
}

}  // namespace causalqwen::linalg
