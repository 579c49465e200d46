/// CauchyTensor<T, Rank, Kind>: the owning form of a tensor of Cauchy variables, the same type
/// as CauchyView (cauchy_view.hpp) with the same rules (kind_rules.hpp): it owns loc and scale
/// (xtensor containers, SoA), shows them as `view()`, a CauchyView of its kind, and every
/// operation on it forwards to the one set of operations over views (operations.hpp).
///
/// A tensor gets its kind as a view does, from the algebra: copied from a typed view
/// (`CauchyTensor(U)` for U from the abduction network, a linear map, …), as the result of an
/// operation, or through the named escape `assume_cauchy_tensor<Kind::...>(loc, scale)` (scale > 0
/// checked). Writing `CauchyTensor<T, R, Kind::independent>(loc, scale)` does not compile.
///
///   auto U = assume_cauchy_tensor<Kind::independent>(loc, scale);   // the caller's claim
///   auto Y = linear(W, b, U);                                       // marginal
///   auto Z = add_noise(-Y * 2.0 + 1.0, b_noise);                    // affine maps and noise: marginal
///   auto S = U + assume_independent(U * 3.0);                       // independent
///
/// Closed, for both kinds: per-component affine maps a⊙X + c, X·s, X/s, X ± c, −X, adding
/// independent Cauchy noise (scale + |b|), the sum of two tensors the caller declares independent
/// of each other. Closed for independent tensors only: linear(W, b, X). A second linear map of a
/// marginal tensor does not compile: fuse the weights with fuse_linear() (linear_map.hpp).
#pragma once
#include <causalqwen/cauchy/cauchy_view.hpp>
#include <causalqwen/cauchy/distribution.hpp>
#include <causalqwen/cauchy/kind_rules.hpp>
#include <causalqwen/cauchy/linear_map.hpp>
#include <causalqwen/cauchy/operations.hpp>
#include <causalqwen/cauchy/ovr.hpp>
#include <causalqwen/core/tensor.hpp>
#include <causalqwen/core/xt.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <type_traits>
#include <utility>

namespace causalqwen {

template <Real T, std::size_t Rank = 1, Kind K = Kind::independent>
class CauchyTensor;
template <Real T, std::size_t R, Kind K>
struct cauchy_traits<CauchyTensor<T, R, K>> {
  static constexpr bool is_cauchy = true;
  static constexpr Kind kind = K;
};
/// Whether X is an owning CauchyTensor (a CauchyView is not).
template <class X>
struct is_cauchy_tensor : std::false_type {};
template <Real T, std::size_t R, Kind K>
struct is_cauchy_tensor<CauchyTensor<T, R, K>> : std::true_type {};
template <class X>
inline constexpr bool is_cauchy_tensor_v = is_cauchy_tensor<std::remove_cvref_t<X>>::value;

template <Kind K, Real T, std::size_t R>
CauchyTensor<T, R, K> assume_cauchy_tensor(xt::xtensor<T, R> loc, xt::xtensor<T, R> scale);
namespace detail_tensor {
template <Real T, std::size_t R>
class Result;
}

template <Real T, std::size_t Rank, Kind K>
class CauchyTensor {
  static_assert(Rank >= 1, "causalqwen::CauchyTensor: Rank must be at least 1.");

 public:
  using value_type = T;
  using storage = xt::xtensor<T, Rank>;
  using shape_type = std::array<std::size_t, Rank>;
  static constexpr std::size_t rank = Rank;
  static constexpr Kind kind = K;

  /// A copy of a typed view (its kind is the view's): the owning form of what the algebra made.
  template <class U>
    requires std::is_same_v<std::remove_const_t<U>, T>
  explicit CauchyTensor(const CauchyView<U, Rank, K>& v) : loc_(copy_of(v.loc)), scale_(copy_of(v.scale)) {}
  /// A kind declared by ordinary code: refused with the sentence
  /// CAUSALQWEN_TENSOR_KIND_OUTSIDE_ALGEBRA (the escape is assume_cauchy_tensor).
  template <class D = void>
  CauchyTensor(storage, storage) {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_TENSOR_KIND_OUTSIDE_ALGEBRA);
  }

  /// The tensor as a view of its kind over its own storage (valid while the tensor lives).
  CauchyView<const T, Rank, K> view() const {
    return {KindKey{}, TensorView<const T, Rank>(loc_), TensorView<const T, Rank>(scale_)};
  }

  const storage& loc() const noexcept { return loc_; }
  const storage& scale() const noexcept { return scale_; }
  const auto& shape() const noexcept { return loc_.shape(); }
  std::size_t size() const noexcept { return loc_.size(); }

  /// The median of every component (= loc). A Cauchy variable has a median but no mean.
  const storage& median() const noexcept { return loc_; }

  /// P(X ≤ x) per component.
  storage cdf(const storage& x) const { return map_x(x, [](T v, T l, T s) { return raw::cdf(v, l, s); }); }
  /// log P(X ≤ x) per component (stable in both tails).
  storage log_cdf(const storage& x) const { return map_x(x, [](T v, T l, T s) { return raw::log_cdf(v, l, s); }); }
  /// log P(X > x) per component (stable in both tails).
  storage log_sf(const storage& x) const { return map_x(x, [](T v, T l, T s) { return raw::log_sf(v, l, s); }); }
  /// −log pdf(y) per component.
  storage nll(const storage& y) const { return map_x(y, [](T v, T l, T s) { return raw::nll(v, l, s); }); }
  /// P(X > threshold) per component, one threshold for all.
  storage ovr_prob(T threshold) const {
    storage out = xt::empty<T>(loc_.shape());
    for (std::size_t i = 0; i < size(); ++i) out.data()[i] = raw::ovr_prob(loc_.data()[i], scale_.data()[i], threshold);
    return out;
  }
  /// The p-quantile of every component, p ∈ (0, 1).
  storage quantile(T p) const {
    detail::check_probability(p, "CauchyTensor::quantile", "p");
    const T w = raw::standard_quantile(p);
    return loc_ + scale_ * w;
  }
  /// One draw per component from uniforms u ∈ (0, 1) of the same shape (= quantile(u)).
  storage sample(const storage& u) const {
    detail::require(u.shape() == loc_.shape(), "CauchyTensor::sample", "u must have the tensor's shape");
    storage out = xt::empty<T>(loc_.shape());
    for (std::size_t i = 0; i < size(); ++i) {
      detail::check_probability(u.data()[i], "CauchyTensor::sample", "u");
      out.data()[i] = raw::sample(u.data()[i], loc_.data()[i], scale_.data()[i]);
    }
    return out;
  }
  /// One draw per component, the uniforms taken from `rng` (open interval (0, 1)).
  template <class Rng>
  storage sample(Rng& rng) const {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    storage out = xt::empty<T>(loc_.shape());
    for (std::size_t i = 0; i < size(); ++i) {
      double u;
      do u = uniform(rng); while (u <= 0.0 || u >= 1.0);
      out.data()[i] = raw::sample(static_cast<T>(u), loc_.data()[i], scale_.data()[i]);
    }
    return out;
  }

  template <class D = void>
  void mean() const {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_NO_MEAN);
  }
  template <class D = void>
  void variance() const {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_NO_VARIANCE);
  }

 private:
  struct Adopt {};  // the storage of a view the algebra typed, or of the escape
  CauchyTensor(Adopt, storage loc, storage scale) noexcept : loc_(std::move(loc)), scale_(std::move(scale)) {}
  template <Kind K2, Real U, std::size_t R>
  friend CauchyTensor<U, R, K2> assume_cauchy_tensor(xt::xtensor<U, R>, xt::xtensor<U, R>);
  template <Real U, std::size_t R>
  friend class detail_tensor::Result;

  static storage copy_of(TensorView<const T, Rank> v) {
    storage out = xt::empty<T>(v.shape);
    std::copy_n(v.data, v.size(), out.data());
    return out;
  }
  template <class F>
  storage map_x(const storage& x, F f) const {
    detail::require(x.shape() == loc_.shape(), "CauchyTensor", "argument must have the tensor's shape");
    storage out = xt::empty<T>(loc_.shape());
    for (std::size_t i = 0; i < size(); ++i) out.data()[i] = f(x.data()[i], loc_.data()[i], scale_.data()[i]);
    return out;
  }

  storage loc_;
  storage scale_;
};

template <class U, std::size_t R, Kind K>
CauchyTensor(const CauchyView<U, R, K>&) -> CauchyTensor<std::remove_const_t<U>, R, K>;

/// The escape for tests, experiments and examples: the caller asserts that loc and scale are the
/// parameters of Cauchy variables of kind K (for independent, mutually independent components).
/// Checked: the same shape, and every scale > 0 (NaN fails). The rules then apply as to any
/// other tensor (a tensor assumed marginal still cannot go through a linear map).
template <Kind K, Real T, std::size_t R>
CauchyTensor<T, R, K> assume_cauchy_tensor(xt::xtensor<T, R> loc, xt::xtensor<T, R> scale) {
  detail::require(loc.shape() == scale.shape(), "CauchyTensor", "loc and scale must have the same shape");
  for (std::size_t i = 0; i < scale.size(); ++i)
    detail::require(scale.data()[i] > T(0), "CauchyTensor", "scale must be > 0 everywhere, got {} at flat index {}",
                    scale.data()[i], i);
  return {typename CauchyTensor<T, R, K>::Adopt{}, std::move(loc), std::move(scale)};
}

namespace detail_tensor {
/// The storage an operation on tensors writes: loc and scale of one shape, handed to the
/// operation over views as a CauchyOut, then owned by a tensor of the kind the view it returned
/// has.
template <Real T, std::size_t R>
class Result {
 public:
  explicit Result(const std::array<std::size_t, R>& shape) : loc_(xt::empty<T>(shape)), scale_(xt::empty<T>(shape)) {}
  CauchyOut<T, R> out() { return {TensorView<T, R>(loc_), TensorView<T, R>(scale_)}; }
  /// The tensor owning this storage, of the kind of `written`, the view the operation returned
  /// over it.
  template <Kind K>
  CauchyTensor<T, R, K> own(const CauchyView<T, R, K>& written) && {
    detail::require(written.loc.data == loc_.data() && written.scale.data == scale_.data(), "CauchyTensor",
                    "an operation's result must be the view over the storage it was given");
    return {typename CauchyTensor<T, R, K>::Adopt{}, std::move(loc_), std::move(scale_)};
  }

 private:
  xt::xtensor<T, R> loc_, scale_;
};
}  // namespace detail_tensor

// ------------------------------------------------------------------ closed operations
// Each allocates the result and forwards to the operation over views of operations.hpp.

/// linear(W, b, X) for independent X: loc' = loc·Wᵀ + b, scale' = scale·|W|ᵀ over the last
/// dimension (batched over the leading ones). W [M, N], b [M] (or empty), X [..., N]. The result
/// is marginal; a marginal X does not compile (CAUSALQWEN_LINEAR_OF_MARGINAL).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, Kind::marginal> linear(const xt::xtensor<T, 2>& W, const xt::xtensor<T, 1>& b,
                                          const CauchyTensor<T, R, K>& X) {
  detail_tensor::Result<T, R> r(detail::with_last<R>(X.shape(), W.shape(0)));
  return std::move(r).own(linear(TensorView<const T, 2>(W), TensorView<const T, 1>(b), X.view(), r.out()));
}

/// linear(map, X) = linear(map.weight, map.bias, X).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, Kind::marginal> linear(const LinearMap<T>& map, const CauchyTensor<T, R, K>& X) {
  return linear(map.weight, map.bias, X);
}

/// Per-component affine map a ⊙ X + c over the last dimension: loc·a + c, scale·|a| (a ≠ 0).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> affine(const CauchyTensor<T, R, K>& X, const xt::xtensor<T, 1>& a, const xt::xtensor<T, 1>& c) {
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(affine(X.view(), TensorView<const T, 1>(a), TensorView<const T, 1>(c), r.out()));
}

/// s·X: loc·s, scale·|s| (s ≠ 0).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator*(T s, const CauchyTensor<T, R, K>& X) {
  detail::require(s != T(0), "operator*", "a Cauchy tensor times 0 is a constant, not a Cauchy tensor");
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(times(s, X.view(), r.out()));
}
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator*(const CauchyTensor<T, R, K>& X, T s) {
  return s * X;
}
/// X/s: loc/s, scale/|s| (s ≠ 0).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator/(const CauchyTensor<T, R, K>& X, T s) {
  detail::require(s != T(0), "operator/", "division of a Cauchy tensor by 0");
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(divide(X.view(), s, r.out()));
}
/// X + c: loc + c.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator+(const CauchyTensor<T, R, K>& X, T c) {
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(shift(X.view(), c, r.out()));
}
/// X − c: loc − c.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator-(const CauchyTensor<T, R, K>& X, T c) {
  return X + (-c);
}
/// −X: −loc, same scale.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator-(const CauchyTensor<T, R, K>& X) {
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(negate(X.view(), r.out()));
}

/// X + |b|·ε with ε independent standard Cauchy noise per component: scale + |b| (b over the
/// last dimension). The kind is kept.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> add_noise(const CauchyTensor<T, R, K>& X, const xt::xtensor<T, 1>& b) {
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(add_noise(X.view(), TensorView<const T, 1>(b), r.out()));
}

/// X + Y for X, Y declared independent of each other (X + assume_independent(Y)): loc + loc,
/// scale + scale. Independent only when both are; otherwise marginal.
template <Real T, std::size_t R, Kind K1, Kind K2>
CauchyTensor<T, R, sum_kind(K1, K2)> operator+(const CauchyTensor<T, R, K1>& X, AssumedIndependent<CauchyTensor<T, R, K2>> Y) {
  detail::require(X.shape() == Y.tensor.shape(), "operator+", "the two Cauchy tensors must have the same shape");
  const auto y = Y.tensor.view();
  detail_tensor::Result<T, R> r(X.shape());
  return std::move(r).own(sum_independent(X.view(), assume_independent(y), r.out()));
}

// The refused operations (exp, log, …, mean, variance) are declared once for every Cauchy type
// in kind_rules.hpp.

}  // namespace causalqwen
