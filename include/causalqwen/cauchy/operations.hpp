/// The closed operations of the Cauchy algebra, written once over views: each reads a typed
/// CauchyView X, writes loc and scale into kind-less CauchyOut buffers, and returns the view over
/// them with the kind the rules of kind_rules.hpp give (through result_view). The owning
/// CauchyTensor's operations (cauchy_tensor.hpp) allocate the buffers and forward here.
///
///   linear(W, b, X, out)        loc·Wᵀ + b, scale·|W|ᵀ   W [M,N], b [M] or none, X [..., N] → [..., M]
///                               independent → marginal; a marginal X does not compile
///   affine(X, a, c, out)        loc·a + c, scale·|a|     a, c [N] (the last dimension), a ≠ 0
///   times(s, X, out)            loc·s, scale·|s|         s ≠ 0
///   divide(X, s, out)           loc/s, scale/|s|         s ≠ 0
///   shift(X, c, out)            loc + c, scale
///   negate(X, out)              −loc, scale
///   add_noise(X, b, out)        loc, scale + |b|         b [N]: X + |b|·ε, ε independent standard Cauchy
///   sum_independent(X, assume_independent(Y), out)     loc_X + loc_Y, scale_X + scale_Y
///
/// out has X's shape (linear: with the last extent M). Every operation but linear may write in
/// place (out over X's own buffers). The scales are not checked: a positive scale stays positive
/// except by overflow or underflow of the arithmetic (scale·|s| with |s| tiny).
#pragma once
#include <causalqwen/cauchy/cauchy_view.hpp>
#include <causalqwen/core/eigen_map.hpp>
#include <causalqwen/core/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <type_traits>

namespace causalqwen {

namespace detail_ops {
/// Parameters taken as written, without deducing T from them (T comes from the output).
template <class T, std::size_t N>
using Const = std::type_identity_t<TensorView<const T, N>>;

/// For each flat index i of X (j = i mod N, N the last extent): f(loc_i, scale_i, j, loc_out_i,
/// scale_out_i), after checking that out has X's shape.
template <class U, std::size_t R, Kind K, class T, class F>
void each_component(const char* fn, const CauchyView<U, R, K>& x, const CauchyOut<T, R>& out, F f) {
  require_shape(out.loc, x.shape(), fn, "loc of the output");
  require_shape(out.scale, x.shape(), fn, "scale of the output");
  const std::size_t n = x.shape()[R - 1], size = x.size();
  for (std::size_t i = 0; i < size; ++i) f(x.loc.data[i], x.scale.data[i], i % n, out.loc.data[i], out.scale.data[i]);
}

/// A vector argument over the last dimension must have its N entries.
template <class T>
void require_last(const char* fn, const char* what, TensorView<const T, 1> v, std::size_t n) {
  detail::require(v.size() == n, fn, "{} must have {} entries (the last dimension), got {}", what, n, v.size());
}
}  // namespace detail_ops

/// linear(W, b, X) for independent X: loc' = loc·Wᵀ + b, scale' = scale·|W|ᵀ over the last
/// dimension (batched over the leading ones), by Eigen GEMM. W [M,N], b [M] (or empty), X [..., N],
/// out [..., M]. Exact: each output component is Cauchy(W_m·loc + b_m, |W_m|·scale); the result is
/// marginal. A marginal X stops compilation with the one sentence CAUSALQWEN_LINEAR_OF_MARGINAL.
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, Kind::marginal> linear(detail_ops::Const<T, 2> W, detail_ops::Const<T, 1> b,
                                        const CauchyView<U, R, K>& X, CauchyOut<T, R> out) {
  if constexpr (K != Kind::independent) {
    static_assert(K == Kind::independent, CAUSALQWEN_LINEAR_OF_MARGINAL);
    std::abort();  // not reached: the assertion stops compilation
  } else {
    const std::size_t M = W.shape[0], N = W.shape[1];
    detail::require(X.shape()[R - 1] == N, "linear", "W has {} columns but the tensor's last dimension is {}", N,
                    X.shape()[R - 1]);
    detail::require(b.size() == 0 || b.size() == M, "linear", "b must have {} entries (W's rows) or none, got {}", M,
                    b.size());
    const auto shape = detail::with_last<R>(X.shape(), M);
    require_shape(out.loc, shape, "linear", "loc of the output");
    require_shape(out.scale, shape, "linear", "scale of the output");
    const auto rows = static_cast<std::ptrdiff_t>(X.size() / N);
    const auto m = static_cast<std::ptrdiff_t>(M), n = static_cast<std::ptrdiff_t>(N);
    const auto Wm = mat(W.data, m, n);
    auto loc_out = mat(out.loc.data, rows, m);
    auto scale_out = mat(out.scale.data, rows, m);
    loc_out.noalias() = mat(static_cast<const T*>(X.loc.data), rows, n) * Wm.transpose();
    if (b.size() == M) loc_out.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(b.data, m);
    scale_out.noalias() = mat(static_cast<const T*>(X.scale.data), rows, n) * Wm.cwiseAbs().transpose();
    return result_view(ops::linear{}, X, out);
  }
}

/// Per-component affine map a ⊙ X + c over the last dimension: loc·a + c, scale·|a|. a and c have
/// the last dimension's length; an a with a zero entry would make that component a constant
/// (scale 0), which is not a Cauchy variable, and is refused.
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> affine(const CauchyView<U, R, K>& X, detail_ops::Const<T, 1> a, detail_ops::Const<T, 1> c,
                           CauchyOut<T, R> out) {
  const std::size_t N = X.shape()[R - 1];
  detail::require(a.size() == N && c.size() == N, "affine", "a and c must have {} entries (the last dimension)", N);
  for (std::size_t j = 0; j < N; ++j) detail::require(a[j] != T(0), "affine", "a must be non-zero, a[{}] = 0", j);
  detail_ops::each_component("affine", X, out, [&](T l, T s, std::size_t j, T& lo, T& so) {
    lo = l * a[j] + c[j];
    so = s * std::fabs(a[j]);
  });
  return result_view(ops::affine{}, X, out);
}

/// s·X: loc·s, scale·|s| (s ≠ 0).
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> times(std::type_identity_t<T> s, const CauchyView<U, R, K>& X, CauchyOut<T, R> out) {
  detail::require(s != T(0), "times", "a Cauchy tensor times 0 is a constant, not a Cauchy tensor");
  const T abs_s = std::fabs(s);
  detail_ops::each_component("times", X, out, [&](T l, T sc, std::size_t, T& lo, T& so) {
    lo = l * s;
    so = sc * abs_s;
  });
  return result_view(ops::affine{}, X, out);
}

/// X/s: loc/s, scale/|s| (s ≠ 0).
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> divide(const CauchyView<U, R, K>& X, std::type_identity_t<T> s, CauchyOut<T, R> out) {
  detail::require(s != T(0), "divide", "division of a Cauchy tensor by 0");
  const T abs_s = std::fabs(s);
  detail_ops::each_component("divide", X, out, [&](T l, T sc, std::size_t, T& lo, T& so) {
    lo = l / s;
    so = sc / abs_s;
  });
  return result_view(ops::affine{}, X, out);
}

/// X + c: loc + c, the same scale.
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> shift(const CauchyView<U, R, K>& X, std::type_identity_t<T> c, CauchyOut<T, R> out) {
  detail_ops::each_component("shift", X, out, [&](T l, T s, std::size_t, T& lo, T& so) {
    lo = l + c;
    so = s;
  });
  return result_view(ops::affine{}, X, out);
}

/// −X: −loc, the same scale.
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> negate(const CauchyView<U, R, K>& X, CauchyOut<T, R> out) {
  detail_ops::each_component("negate", X, out, [&](T l, T s, std::size_t, T& lo, T& so) {
    lo = -l;
    so = s;
  });
  return result_view(ops::negate{}, X, out);
}

/// X + |b|·ε with ε independent standard Cauchy noise per component: loc, scale + |b| (b over the
/// last dimension). The kind is kept: noise independent of everything adds no dependence.
template <class U, std::size_t R, Kind K, class T>
CauchyView<T, R, K> add_noise(const CauchyView<U, R, K>& X, detail_ops::Const<T, 1> b, CauchyOut<T, R> out) {
  detail_ops::require_last<T>("add_noise", "b", b, X.shape()[R - 1]);
  detail_ops::each_component("add_noise", X, out, [&](T l, T s, std::size_t j, T& lo, T& so) {
    lo = l;
    so = s + std::fabs(b[j]);
  });
  return result_view(ops::add_noise{}, X, out);
}

/// A Cauchy tensor or view the caller declares independent of what it is added to.
template <class X>
struct AssumedIndependent {
  const X& tensor;
};
/// Declares Y independent of the other operand of the sum: X + assume_independent(Y) for
/// tensors, sum_independent(X, assume_independent(Y), out) for views.
template <CauchyLike X>
AssumedIndependent<X> assume_independent(const X& Y) {
  return {Y};
}

/// X + Y for X, Y independent of each other: loc + loc, scale + scale. Independent only when both
/// are; otherwise marginal.
template <class U1, class U2, std::size_t R, Kind K1, Kind K2, class T>
CauchyView<T, R, sum_kind(K1, K2)> sum_independent(const CauchyView<U1, R, K1>& X,
                                                   AssumedIndependent<CauchyView<U2, R, K2>> Y, CauchyOut<T, R> out) {
  const auto& y = Y.tensor;
  detail::require(X.shape() == y.shape(), "sum_independent", "the two Cauchy tensors must have the same shape, got {} and {}",
                  shape_text(X.shape()), shape_text(y.shape()));
  require_shape(out.loc, X.shape(), "sum_independent", "loc of the output");
  require_shape(out.scale, X.shape(), "sum_independent", "scale of the output");
  for (std::size_t i = 0; i < X.size(); ++i) {
    out.loc.data[i] = X.loc.data[i] + y.loc.data[i];
    out.scale.data[i] = X.scale.data[i] + y.scale.data[i];
  }
  return result_view(ops::sum_independent{}, X, y, out);
}

}  // namespace causalqwen
