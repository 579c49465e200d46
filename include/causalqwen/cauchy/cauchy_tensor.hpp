/// CauchyTensor<T, Rank, Kind>: a tensor of Cauchy variables held as loc and scale (SoA),
/// whose type says which operations keep it Cauchy (linear stability as a compile-time
/// property).
///
///   Kind::independent — components mutually independent (what the abduction network yields);
///   Kind::marginal    — each component exactly Cauchy, jointly dependent (what a linear map
///                       of independent components yields).
///
/// Closed, for both kinds: per-component affine maps a⊙X + c (loc·a + c, scale·|a|), negation,
/// adding independent Cauchy noise X + |b|·ε (scale + |b|), and the sum of two tensors the
/// caller declares independent of each other (`X + assume_independent(Y)`).
/// Closed for independent tensors only: linear(W, b, X) (loc' = W·loc + b, scale' = |W|·scale).
/// For a marginal tensor |W₂|·|W₁|·γ only bounds the true scale |W₂W₁|·γ, so a second linear
/// map does not compile: fuse the weights with fuse_linear() and apply one map.
/// Refused, each with one sentence from the compiler: exp, log, tanh, silu, softmax, relu, abs,
/// the product or quotient of two Cauchy tensors, mean() and variance() (neither exists).
/// closed_under_v<Op, X> answers the same questions without triggering the error.
#pragma once
#include <causalqwen/cauchy/ovr.hpp>
#include <causalqwen/core/eigen_map.hpp>
#include <causalqwen/core/xt.hpp>

#include <array>
#include <cstddef>
#include <random>
#include <type_traits>
#include <utility>

namespace causalqwen {

/// The dependence structure of a CauchyTensor's components.
enum class Kind { independent, marginal };

template <Real T, std::size_t Rank = 1, Kind K = Kind::independent>
class CauchyTensor;

/// Operation tags for closed_under_v.
namespace ops {
struct linear {};           // linear(W, b, X)
struct affine {};           // a ⊙ X + c, X * s, X / s, X + s
struct negate {};           // −X
struct add_noise {};        // X + |b|·ε, ε independent standard Cauchy
struct sum_independent {};  // X + assume_independent(Y)
struct exp {};
struct log {};
struct tanh {};
struct silu {};
struct softmax {};
struct relu {};
struct abs {};
struct product {};   // X * Y of two Cauchy tensors
struct quotient {};  // X / Y of two Cauchy tensors
struct mean {};
struct variance {};
}  // namespace ops

template <class X>
struct is_cauchy_tensor : std::false_type {};
template <Real T, std::size_t R, Kind K>
struct is_cauchy_tensor<CauchyTensor<T, R, K>> : std::true_type {};
template <class X>
inline constexpr bool is_cauchy_tensor_v = is_cauchy_tensor<std::remove_cvref_t<X>>::value;

/// Whether applying Op to X yields a Cauchy tensor again (exactly, not as a bound).
template <class Op, class X>
struct closed_under : std::false_type {};
template <class Op, Real T, std::size_t R, Kind K>
struct closed_under<Op, CauchyTensor<T, R, K>>
    : std::bool_constant<std::is_same_v<Op, ops::affine> || std::is_same_v<Op, ops::negate> ||
                         std::is_same_v<Op, ops::add_noise> ||
                         std::is_same_v<Op, ops::sum_independent> ||
                         (std::is_same_v<Op, ops::linear> && K == Kind::independent)> {};
template <class Op, class X>
inline constexpr bool closed_under_v = closed_under<Op, std::remove_cvref_t<X>>::value;

namespace detail {
template <class...>
inline constexpr bool always_false_v = false;

/// Shape of a CauchyTensor with its last dimension replaced.
template <std::size_t R>
std::array<std::size_t, R> with_last(std::array<std::size_t, R> shape, std::size_t last) {
  shape[R - 1] = last;
  return shape;
}
}  // namespace detail

/// A weight matrix W [M, N] and bias b [M] standing for x ↦ W·x + b.
template <Real T>
struct LinearMap {
  xt::xtensor<T, 2> weight;  // [M, N]
  xt::xtensor<T, 1> bias;    // [M]
};

template <Real T, std::size_t Rank, Kind K>
class CauchyTensor {
  static_assert(Rank >= 1, "causalqwen::CauchyTensor: Rank must be at least 1.");

 public:
  using value_type = T;
  using storage = xt::xtensor<T, Rank>;
  using shape_type = std::array<std::size_t, Rank>;
  static constexpr std::size_t rank = Rank;
  static constexpr Kind kind = K;

  CauchyTensor() = default;

  /// Checked: loc and scale must have the same shape and every scale must be > 0 (NaN fails).
  CauchyTensor(storage loc, storage scale) : loc_(std::move(loc)), scale_(std::move(scale)) {
    detail::require(loc_.shape() == scale_.shape(), "CauchyTensor",
                    "loc and scale must have the same shape");
    for (std::size_t i = 0; i < scale_.size(); ++i)
      detail::require(scale_.data()[i] > T(0), "CauchyTensor",
                      "scale must be > 0 everywhere, got {} at flat index {}", scale_.data()[i], i);
  }

  /// Unchecked construction for hot paths whose scales are positive by construction
  /// (softplus outputs, |W|·scale with scale > 0).
  static CauchyTensor unchecked(storage loc, storage scale) noexcept {
    CauchyTensor x;
    x.loc_ = std::move(loc);
    x.scale_ = std::move(scale);
    return x;
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
    static_assert(detail::always_false_v<D>,
                  "causalqwen: a Cauchy distribution has no mean; use median() (= loc) or quantile().");
  }
  template <class D = void>
  void variance() const {
    static_assert(detail::always_false_v<D>,
                  "causalqwen: a Cauchy distribution has no variance; use scale() or an interquartile range from quantile().");
  }

 private:
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

// ------------------------------------------------------------------ closed operations

/// linear(W, b, X) for independent X: loc' = loc·Wᵀ + b, scale' = scale·|W|ᵀ over the last
/// dimension (batched over the leading ones), by Eigen GEMM. W [M, N], b [M] (or empty), X [..., N].
/// Exact: each output component is Cauchy(W_m·loc + b_m, |W_m|·scale); the result is marginal.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, Kind::marginal> linear(const xt::xtensor<T, 2>& W, const xt::xtensor<T, 1>& b,
                                          const CauchyTensor<T, R, K>& X) {
  if constexpr (K == Kind::marginal) {
    static_assert(K != Kind::marginal,
                  "causalqwen::linear: a marginal Cauchy tensor has dependent components, so |W| would only bound its scale; fuse the weights first with causalqwen::fuse_linear(W2, b2, W1, b1) and apply one linear map to the independent tensor.");
    return {};
  } else {
    const std::size_t M = W.shape(0), N = W.shape(1);
    detail::require(X.shape()[R - 1] == N, "linear",
                    "W has {} columns but the tensor's last dimension is {}", N, X.shape()[R - 1]);
    detail::require(b.size() == 0 || b.size() == M, "linear", "b must have {} entries (W's rows) or none, got {}", M, b.size());
    const auto rows = static_cast<std::ptrdiff_t>(X.size() / N);
    std::array<std::size_t, R> out_shape;
    std::copy(X.shape().begin(), X.shape().end(), out_shape.begin());
    out_shape = detail::with_last<R>(out_shape, M);
    xt::xtensor<T, R> loc = xt::empty<T>(out_shape), scale = xt::empty<T>(out_shape);
    const auto Wm = mat(W.data(), static_cast<std::ptrdiff_t>(M), static_cast<std::ptrdiff_t>(N));
    auto loc_out = mat(loc.data(), rows, static_cast<std::ptrdiff_t>(M));
    auto scale_out = mat(scale.data(), rows, static_cast<std::ptrdiff_t>(M));
    loc_out.noalias() = mat(X.loc().data(), rows, static_cast<std::ptrdiff_t>(N)) * Wm.transpose();
    if (b.size() == M)
      loc_out.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(b.data(), static_cast<std::ptrdiff_t>(M));
    scale_out.noalias() = mat(X.scale().data(), rows, static_cast<std::ptrdiff_t>(N)) * Wm.cwiseAbs().transpose();
    return CauchyTensor<T, R, Kind::marginal>::unchecked(std::move(loc), std::move(scale));
  }
}

/// linear(map, X) = linear(map.weight, map.bias, X).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, Kind::marginal> linear(const LinearMap<T>& map, const CauchyTensor<T, R, K>& X) {
  return linear(map.weight, map.bias, X);
}

/// fuse_linear(W2, b2, W1, b1) = {W2·W1, W2·b1 + b2}: the one linear map equal to applying
/// (W1, b1) then (W2, b2), so that linear(fused, U) gives the exact scale |W2·W1|·γ.
template <Real T>
LinearMap<T> fuse_linear(const xt::xtensor<T, 2>& W2, const xt::xtensor<T, 1>& b2,
                         const xt::xtensor<T, 2>& W1, const xt::xtensor<T, 1>& b1) {
  const auto M = static_cast<std::ptrdiff_t>(W2.shape(0)), K = static_cast<std::ptrdiff_t>(W2.shape(1));
  const auto N = static_cast<std::ptrdiff_t>(W1.shape(1));
  detail::require(W1.shape(0) == W2.shape(1), "fuse_linear", "W2 has {} columns but W1 has {} rows", W2.shape(1), W1.shape(0));
  detail::require(b1.size() == 0 || b1.size() == W1.shape(0), "fuse_linear", "b1 must have {} entries or none", W1.shape(0));
  detail::require(b2.size() == 0 || b2.size() == W2.shape(0), "fuse_linear", "b2 must have {} entries or none", W2.shape(0));
  LinearMap<T> fused{xt::empty<T>({std::size_t(M), std::size_t(N)}), xt::zeros<T>({std::size_t(M)})};
  mat(fused.weight.data(), M, N).noalias() = mat(W2.data(), M, K) * mat(W1.data(), K, N);
  auto bias = mat(fused.bias.data(), M, 1);
  if (b1.size()) bias.noalias() = mat(W2.data(), M, K) * mat(b1.data(), K, 1);
  if (b2.size()) bias += mat(b2.data(), M, 1);
  return fused;
}

/// Per-component affine map a ⊙ X + c over the last dimension: loc·a + c, scale·|a|.
/// a and c have the last dimension's length; an a with a zero entry would make that component
/// a constant (scale 0), which is not a Cauchy variable, and is refused.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> affine(const CauchyTensor<T, R, K>& X, const xt::xtensor<T, 1>& a,
                             const xt::xtensor<T, 1>& c) {
  const std::size_t N = X.shape()[R - 1];
  detail::require(a.size() == N && c.size() == N, "affine", "a and c must have {} entries (the last dimension)", N);
  for (std::size_t j = 0; j < N; ++j) detail::require(a(j) != T(0), "affine", "a must be non-zero, a[{}] = 0", j);
  auto loc = X.loc();
  auto scale = X.scale();
  for (std::size_t i = 0; i < loc.size(); ++i) {
    const std::size_t j = i % N;
    loc.data()[i] = loc.data()[i] * a(j) + c(j);
    scale.data()[i] = scale.data()[i] * std::fabs(a(j));
  }
  return CauchyTensor<T, R, K>::unchecked(std::move(loc), std::move(scale));
}

/// s·X: loc·s, scale·|s| (s ≠ 0).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator*(T s, const CauchyTensor<T, R, K>& X) {
  detail::require(s != T(0), "operator*", "a Cauchy tensor times 0 is a constant, not a Cauchy tensor");
  return CauchyTensor<T, R, K>::unchecked(X.loc() * s, X.scale() * std::fabs(s));
}
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator*(const CauchyTensor<T, R, K>& X, T s) {
  return s * X;
}
/// X/s: loc/s, scale/|s| (s ≠ 0).
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator/(const CauchyTensor<T, R, K>& X, T s) {
  detail::require(s != T(0), "operator/", "division of a Cauchy tensor by 0");
  return CauchyTensor<T, R, K>::unchecked(X.loc() / s, X.scale() / std::fabs(s));
}
/// X + c: loc + c.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator+(const CauchyTensor<T, R, K>& X, T c) {
  return CauchyTensor<T, R, K>::unchecked(X.loc() + c, X.scale());
}
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator-(const CauchyTensor<T, R, K>& X, T c) {
  return X + (-c);
}
/// −X: −loc, same scale.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> operator-(const CauchyTensor<T, R, K>& X) {
  return CauchyTensor<T, R, K>::unchecked(-X.loc(), X.scale());
}

/// X + |b|·ε with ε independent standard Cauchy noise per component: scale + |b| (b over the
/// last dimension). The kind is kept: noise independent of everything adds no dependence.
template <Real T, std::size_t R, Kind K>
CauchyTensor<T, R, K> add_noise(const CauchyTensor<T, R, K>& X, const xt::xtensor<T, 1>& b) {
  const std::size_t N = X.shape()[R - 1];
  detail::require(b.size() == N, "add_noise", "b must have {} entries (the last dimension), got {}", N, b.size());
  auto scale = X.scale();
  for (std::size_t i = 0; i < scale.size(); ++i) scale.data()[i] += std::fabs(b(i % N));
  return CauchyTensor<T, R, K>::unchecked(X.loc(), std::move(scale));
}

/// A Cauchy tensor the caller declares independent of the tensor it is added to.
template <class X>
struct AssumedIndependent {
  const X& tensor;
};
/// Declares Y independent of the other operand of +: X + assume_independent(Y).
template <Real T, std::size_t R, Kind K>
AssumedIndependent<CauchyTensor<T, R, K>> assume_independent(const CauchyTensor<T, R, K>& Y) {
  return {Y};
}
/// X + Y for X, Y independent of each other: loc + loc, scale + scale. Independent only when
/// both are; otherwise marginal.
template <Real T, std::size_t R, Kind K1, Kind K2>
auto operator+(const CauchyTensor<T, R, K1>& X, AssumedIndependent<CauchyTensor<T, R, K2>> Y) {
  constexpr Kind K = (K1 == Kind::independent && K2 == Kind::independent) ? Kind::independent : Kind::marginal;
  detail::require(X.shape() == Y.tensor.shape(), "operator+", "the two Cauchy tensors must have the same shape");
  return CauchyTensor<T, R, K>::unchecked(X.loc() + Y.tensor.loc(), X.scale() + Y.tensor.scale());
}

// ------------------------------------------------------------------ refused operations
// Each is a poisoned overload: found by ADL for unqualified calls and by causalqwen:: calls,
// it prints one sentence through static_assert.

#define CAUSALQWEN_REFUSE_UNARY(fn, sentence)                                     \
  template <Real T, std::size_t R, Kind K>                                        \
  CauchyTensor<T, R, K> fn(const CauchyTensor<T, R, K>& X) {                      \
    static_assert(closed_under_v<ops::fn, CauchyTensor<T, R, K>>, sentence);      \
    return X;                                                                     \
  }
CAUSALQWEN_REFUSE_UNARY(exp, "causalqwen: exp of a Cauchy tensor is not Cauchy (it is log-Cauchy); only affine and linear maps keep a Cauchy tensor Cauchy, so transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(log, "causalqwen: log of a Cauchy tensor is not Cauchy (and undefined where the variable is negative); transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(tanh, "causalqwen: tanh of a Cauchy tensor is not Cauchy; only affine and linear maps keep a Cauchy tensor Cauchy, so transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(silu, "causalqwen: silu of a Cauchy tensor is not Cauchy; apply nonlinearities before the abduction network, not to its Cauchy output.")
CAUSALQWEN_REFUSE_UNARY(softmax, "causalqwen: softmax of Cauchy tensors is not Cauchy; use ovr_prob() for class probabilities, or softmax over loc (the compatible mode).")
CAUSALQWEN_REFUSE_UNARY(relu, "causalqwen: relu of a Cauchy tensor is not Cauchy (it has an atom at 0); transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(abs, "causalqwen: abs of a Cauchy tensor is half-Cauchy, not Cauchy; transform samples or quantiles instead.")
#undef CAUSALQWEN_REFUSE_UNARY

template <Real T, std::size_t R, Kind K1, Kind K2>
CauchyTensor<T, R, K1> operator*(const CauchyTensor<T, R, K1>& X, const CauchyTensor<T, R, K2>&) {
  static_assert(closed_under_v<ops::product, CauchyTensor<T, R, K1>>,
                "causalqwen: the product of two Cauchy tensors is not Cauchy; multiply by a constant or a weight matrix instead.");
  return X;
}
template <Real T, std::size_t R, Kind K1, Kind K2>
CauchyTensor<T, R, K1> operator/(const CauchyTensor<T, R, K1>& X, const CauchyTensor<T, R, K2>&) {
  static_assert(closed_under_v<ops::quotient, CauchyTensor<T, R, K1>>,
                "causalqwen: the quotient of two Cauchy tensors is not Cauchy; divide by a non-zero constant instead.");
  return X;
}
template <Real T, std::size_t R, Kind K1, Kind K2>
CauchyTensor<T, R, K1> operator+(const CauchyTensor<T, R, K1>& X, const CauchyTensor<T, R, K2>&) {
  static_assert(detail::always_false_v<T>,
                "causalqwen: the sum of two Cauchy tensors is Cauchy only if they are independent of each other, which their types cannot show; write X + causalqwen::assume_independent(Y).");
  return X;
}

/// mean(X) and variance(X) as free functions are refused like the members.
template <Real T, std::size_t R, Kind K>
void mean(const CauchyTensor<T, R, K>& X) {
  X.template mean<T>();
}
template <Real T, std::size_t R, Kind K>
void variance(const CauchyTensor<T, R, K>& X) {
  X.template variance<T>();
}

}  // namespace causalqwen
