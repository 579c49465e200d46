/// The linear map of Cauchy views, the one place where the model pushes independent Cauchy
/// components through a weight matrix:
///   S = linear(W, b, A):  loc_S = loc_A·Wᵀ + b,  scale_S = scale_A·|W|ᵀ     A [R,C] → S [R,N]
/// Exact because A's components are independent; the result is marginal (its components share
/// A's and are dependent), so a second linear map of it does not compile (kind_rules.hpp). The
/// result is returned as a marginal view over the caller's buffers (a kind-less CauchyOut); the
/// one-position form (one row w of a matrix, one position of A) returns one Cauchy variable.
///
/// W is one handle (weight.hpp) with the forms the products read. For R ≤ fused_rows_max
/// (decoding) one pass over W computes both products, a block of four rows of W at a time
/// (gemv.hpp's dot_rows), reading W once instead of W and |W|: decoding is bound by the memory
/// traffic of the class weights; W is then read from its bf16 decoding copy (W.decode) when it
/// has one, or, from an int8 copy, by the integer dot products of int8_dot.hpp. More rows use two
/// GEMMs over W.values and W.abs, in float or (Format::bf16, mixed-precision training) on bf16
/// operands with float sums, both read from W.bf16_copy when W has one.
#pragma once
#include "causalqwen/cauchy/cauchy_view.hpp"
#include "causalqwen/linalg/abs_weight.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/gemv.hpp"
#include "causalqwen/linalg/weight.hpp"

#include <cmath>

namespace causalqwen::linalg {

/// Rows up to which the fused single-pass kernel is used.
inline constexpr std::size_t fused_rows_max = 16;

namespace detail_cauchy_linear {
/// The one-position form's refusal of an input whose length is not w's (out of line, so that
/// the form itself stays small enough to be inlined into its callers' loops).
[[noreturn, gnu::cold, gnu::noinline]] inline void wrong_length(std::size_t got, std::size_t C) {
  throw DomainError(fmt::format("causalqwen::cauchy_linear: the input has {} components, w has {}", got, C));
}
/// The matrix form's refusal of a product of more rows without |W| at hand.
template <class T>
void require_abs(const Weight<const T>& W) {
  detail::require(W.abs_from_copy() || (!W.abs.empty() && W.abs.shape == W.values.shape), "cauchy_linear",
                  "|W| {} is needed for W {} beyond {} rows", shape_text(W.abs.shape), shape_text(W.values.shape),
                  fused_rows_max);
}
}  // namespace detail_cauchy_linear

/// S = linear(W, b, A) (see the file comment), written into `out` and returned as the marginal
/// view over it. W [N,C] (W.abs needed only beyond fused_rows_max rows, and then not with the
/// bf16 copy of Format::bf16), b [N] (may be empty), A [R,C], out [R,N].
template <class T, Kind K>
CauchyView<T, 2, Kind::marginal> cauchy_linear(CauchyOut<T, 2> out, const Weight<const T>& W, TensorView<const T, 1> b,
                                               CauchyView<const T, 2, K> a) {
  static_assert(K == Kind::independent, CAUSALQWEN_LINEAR_OF_MARGINAL);
  const TensorView<const T, 2> w = W.values;
  const PackedRef& packed = W.decode;
  const std::size_t N = w.shape[0], C = w.shape[1], R = a.loc.shape[0];
  if (packed.packed())
    detail::require(packed.rows == N && packed.cols == C, "cauchy_linear", "the packed W [{},{}] is not W {}", packed.rows,
                    packed.cols, shape_text(w.shape));
  require_shape(a.loc, {R, C}, "cauchy_linear", "loc of the input");
  require_shape(out.loc, {R, N}, "cauchy_linear", "loc of the output");
  require_shape(out.scale, {R, N}, "cauchy_linear", "scale of the output");
  const auto S = result_view(ops::linear{}, a, out);
  if (R > fused_rows_max || !detail_gemv::simd_type<T>) {
    detail_cauchy_linear::require_abs(W);
    Weight<const T> product = W;  // the decoding copy serves the fused pass only
    product.decode = {};
    linear_forward<T>(out.loc, a.loc, product, b);
    abs_linear_forward<T>(out.scale, a.scale, W);
    return S;
  }
  if constexpr (std::is_same_v<T, float>)
    if (packed.type == Format::int8) {
      int8_cauchy_rows(packed, a.loc.data, a.scale.data, R, C, b.empty() ? nullptr : b.data, out.loc.data, out.scale.data);
      return S;
    }
  // one task = 256 rows of W; within it, blocks of 4 rows are read once for all R inputs
  with_weight_rows<T>(w, packed, [&](const auto& rows) {
    for_row_blocks(N, 256, N * C, [&](std::size_t n0, std::size_t n1) {
      T l[4], s[4];
      auto store = [&](std::size_t r, std::size_t n, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) {
          out.loc.data[r * N + n + i] = l[i] + (b.empty() ? T(0) : b[n + i]);
          out.scale.data[r * N + n + i] = s[i];
        }
      };
      std::size_t n = n0;
      for (; n + 4 <= n1; n += 4)
        for (std::size_t r = 0; r < R; ++r) {
          dot_rows<T, 4>(rows.from(n), a.loc.data + r * C, a.scale.data + r * C, C, l, s);
          store(r, n, 4);
        }
      for (; n < n1; ++n)
        for (std::size_t r = 0; r < R; ++r) {
          dot_rows<T, 1>(rows.from(n), a.loc.data + r * C, a.scale.data + r * C, C, l, s);
          store(r, n, 1);
        }
    });
  });
  return S;
}


/// y = linear(w, b, a) of one position, through row `row` w [C] of a weight matrix W (the value
/// head, or one class):  loc_y = b + Σ_j loc_a,j·w_j,  scale_y = Σ_j scale_a,j·|w_j|, summed in
/// order of j, from W.values. a [C] must be independent, as for the matrix form.
template <class T, Kind K>
CauchyParams<T> cauchy_linear(const Weight<const T>& W, std::size_t row, T b, CauchyView<const T, 1, K> a) {
  static_assert(K == Kind::independent, CAUSALQWEN_LINEAR_OF_MARGINAL);
  const std::size_t C = W.values.shape[1];
  if (a.loc.shape[0] != C) [[unlikely]]
    detail_cauchy_linear::wrong_length(a.loc.shape[0], C);
  const T* w = W.values.data + row * C;
  T loc = b, scale = 0;
  for (std::size_t j = 0; j < C; ++j) {
    loc += a.loc.data[j] * w[j];
    scale += a.scale.data[j] * std::fabs(w[j]);
  }
  return {loc, scale};
}

/// Backward of cauchy_linear from dS = (∂L/∂loc_S, ∂L/∂scale_S) [R,N]:
///   dA.d_loc += dS.d_loc·W,  dA.d_scale += dS.d_scale·|W|,
///   dW += dS.d_locᵀ·loc_A + sign(W) ⊙ (dS.d_scaleᵀ·scale_A)   (offered first to `sink`)
/// (the bias gradient, colsum(dS.d_loc), is left to the caller, which may share it). W.abs is
/// read for |W|; Format::bf16: the four products on bf16 operands with float sums, dS·W and
/// dS·|W| reading W.bf16_copy when W has one (|W| with the sign bits cleared; W.abs is then not
/// read).
template <class T>
void cauchy_linear_backward(CauchyViewGrad<T, 2> da, TensorView<T, 2> dw, CauchyViewGrad<const T, 2> ds,
                            const Weight<const T>& W, CauchyView<const T, 2, Kind::independent> a,
                            WeightGradSink<T>* sink = nullptr) {
  linear_backward_input<T>(da.d_loc, ds.d_loc, W);
  abs_linear_backward_input<T>(da.d_scale, ds.d_scale, W);
  linear_backward_weight<T>(dw, ds.d_loc, a.loc, sink, W.precision);
  abs_linear_backward_weight<T>(dw, ds.d_scale, a.scale, W, sink);
}

}  // namespace causalqwen::linalg
