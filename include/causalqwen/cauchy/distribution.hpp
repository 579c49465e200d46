/// The scalar Cauchy distribution X ~ Cauchy(loc, scale): density, distribution function and
/// their logarithms, survival function, quantile, sampling and negative log-likelihood, each
/// with a `*_grad` companion returning the value and its analytic partial derivatives.
///
/// Numerics: with z = (x − loc)/scale and θ(t) = atan2(1, t),
///   cdf = θ(−z)/π for z < 0 and 1 − θ(z)/π otherwise (π·P = atan2(1, −z), never ½ + atan/π),
///   log of the small side = log θ − log π, of the large side = log1p(−θ/π),
///   nll = log π + log scale + log1p(z²), with 2·log|z| + log1p(1/z²) for |z| > 1,
///   quantile = loc − scale/tan(π·p) with p reduced to the side nearer 0 (no cancellation).
/// Stated accuracies are checked in tests/cauchy against Boost.Math in long double.
///
/// raw:: forms are unchecked and noexcept (hot loops); the plain forms throw DomainError for
/// scale ≤ 0 or NaN, and for p ∉ (0, 1).
#pragma once
#include <causalqwen/cauchy/special.hpp>

namespace causalqwen {

/// A value and its partials with respect to x (or y for nll, or u for sample), loc and scale.
template <Real T>
struct CauchyGrad {
  T value;
  T d_x;
  T d_loc;
  T d_scale;
};

/// A quantile and its partials with respect to p, loc and scale.
template <Real T>
struct QuantileGrad {
  T value;
  T d_p;
  T d_loc;
  T d_scale;
};

namespace raw {

/// A function g of the standardised z, with dg/dz and z·dg/dz (kept separate so that both stay
/// finite when z = ±∞).
template <Real T>
struct StandardGrad {
  T value;
  T dz;
  T z_dz;
};

/// g(z) = log F(z) for the standard Cauchy, F(z) = ½ + atan(z)/π. Relative error ≤ 4 ulp.
template <Real T>
inline StandardGrad<T> standard_log_cdf_grad(T z) noexcept {
  if (z < T(0)) {  // small side: log(θ(−z)) − log π
    const T t = -z;
    const T theta = small_side_angle(t);
    const auto slope = small_side_slope(t, theta);
    return {std::log(theta) - log_pi<T>, slope.slope, -slope.t_slope};
  }
  const T theta = small_side_angle(z);  // large side: log1p(−θ(z)/π)
  const T rest = pi<T> - theta;          // π·F(z) ∈ [π/2, π]
  return {std::log1p(-theta / pi<T>), inv_one_plus_sq(z) / rest, z_over_one_plus_sq(z) / rest};
}

/// Turns partials of g(z), z = (x − loc)/scale, into partials with respect to x, loc, scale.
template <Real T>
inline CauchyGrad<T> chain_standard(StandardGrad<T> g, T scale) noexcept {
  const T d_x = g.dz / scale;
  return {g.value, d_x, -d_x, -g.z_dz / scale};
}

/// z = (x − loc)/scale.
template <Real T>
inline T standardize(T x, T loc, T scale) noexcept {
  return (x - loc) / scale;
}

/// pdf(x) = 1/(π·scale·(1 + z²)). Relative error ≤ 3 ulp (until the result is subnormal).
template <Real T>
inline T pdf(T x, T loc, T scale) noexcept {
  return inv_one_plus_sq(standardize(x, loc, scale)) / pi<T> / scale;
}
/// pdf and ∂/∂x = −2z/(1+z²)·pdf/scale, ∂/∂loc = −∂/∂x, ∂/∂scale = (z² − 1)/(1 + z²)·pdf/scale.
template <Real T>
inline CauchyGrad<T> pdf_grad(T x, T loc, T scale) noexcept {
  const T z = standardize(x, loc, scale);
  const T inv = inv_one_plus_sq(z);
  const T p = inv / pi<T> / scale;
  const T d_x = T(-2) * z_over_one_plus_sq(z) * p / scale;
  return {p, d_x, -d_x, (T(1) - T(2) * inv) * p / scale};
}

/// nll(y) = −log pdf(y) = log π + log scale + log1p(z²), z = (y − loc)/scale, using
/// 2·log|z| + log1p(1/z²) when |z| > 1. Absolute error ≤ 4 ulp of max(1, |nll|).
template <Real T>
inline T nll(T y, T loc, T scale) noexcept {
  const T z = standardize(y, loc, scale);
  const T t = std::fabs(z);
  const T log1p_z2 = t > T(1) ? T(2) * std::log(t) + std::log1p(T(1) / (t * t)) : std::log1p(t * t);
  return log_pi<T> + std::log(scale) + log1p_z2;
}
/// nll and ∂/∂y = 2z/((1+z²)·scale), ∂/∂loc = −∂/∂y, ∂/∂scale = (2/(1+z²) − 1)/scale.
template <Real T>
inline CauchyGrad<T> nll_grad(T y, T loc, T scale) noexcept {
  const T z = standardize(y, loc, scale);
  const T d_y = T(2) * z_over_one_plus_sq(z) / scale;
  return {nll(y, loc, scale), d_y, -d_y, (T(2) * inv_one_plus_sq(z) - T(1)) / scale};
}

/// log pdf(x) = −nll(x). Same accuracy as nll.
template <Real T>
inline T log_pdf(T x, T loc, T scale) noexcept {
  return -nll(x, loc, scale);
}
template <Real T>
inline CauchyGrad<T> log_pdf_grad(T x, T loc, T scale) noexcept {
  const auto g = nll_grad(x, loc, scale);
  return {-g.value, -g.d_x, -g.d_loc, -g.d_scale};
}

/// cdf(x) = P(X ≤ x) = θ(−z)/π for z < 0, 1 − θ(z)/π otherwise. Relative error ≤ 3 ulp;
/// the lower tail keeps full relative accuracy down to z = −1e30 and beyond.
template <Real T>
inline T cdf(T x, T loc, T scale) noexcept {
  const T z = standardize(x, loc, scale);
  return z < T(0) ? small_side_angle(-z) / pi<T> : T(1) - small_side_angle(z) / pi<T>;
}
/// cdf and ∂/∂x = pdf(x), ∂/∂loc = −pdf(x), ∂/∂scale = −z·pdf(x).
template <Real T>
inline CauchyGrad<T> cdf_grad(T x, T loc, T scale) noexcept {
  const T z = standardize(x, loc, scale);
  return chain_standard<T>({cdf(x, loc, scale), inv_one_plus_sq(z) / pi<T>,
                            z_over_one_plus_sq(z) / pi<T>},
                           scale);
}

/// sf(x) = P(X > x) = 1 − cdf(x), computed as cdf of the mirrored point (no cancellation).
template <Real T>
inline T sf(T x, T loc, T scale) noexcept {
  const T z = standardize(x, loc, scale);
  return z > T(0) ? small_side_angle(z) / pi<T> : T(1) - small_side_angle(-z) / pi<T>;
}
/// sf and its partials (the negatives of cdf's).
template <Real T>
inline CauchyGrad<T> sf_grad(T x, T loc, T scale) noexcept {
  const auto g = cdf_grad(x, loc, scale);
  return {sf(x, loc, scale), -g.d_x, -g.d_loc, -g.d_scale};
}

/// log cdf(x): log θ(−z) − log π on the lower side, log1p(−θ(z)/π) on the upper side.
/// Relative error ≤ 4 ulp for |z| up to 1e30; log_cdf(−∞) = −∞, log_cdf(+∞) = 0.
template <Real T>
inline T log_cdf(T x, T loc, T scale) noexcept {
  return standard_log_cdf_grad(standardize(x, loc, scale)).value;
}
/// log cdf and its partials: d/dz log F = 1/((1+z²)·θ(−z)) on the lower side (→ 1/|z|).
template <Real T>
inline CauchyGrad<T> log_cdf_grad(T x, T loc, T scale) noexcept {
  return chain_standard(standard_log_cdf_grad(standardize(x, loc, scale)), scale);
}

/// log sf(x) = log cdf of the mirrored point. Same accuracy as log_cdf.
template <Real T>
inline T log_sf(T x, T loc, T scale) noexcept {
  return standard_log_cdf_grad(-standardize(x, loc, scale)).value;
}
template <Real T>
inline CauchyGrad<T> log_sf_grad(T x, T loc, T scale) noexcept {
  const auto g = standard_log_cdf_grad(-standardize(x, loc, scale));
  return chain_standard<T>({g.value, -g.dz, g.z_dz}, scale);
}

/// The standard Cauchy quantile w(p) = tan(π(p − ½)), evaluated without cancellation:
/// tan(π(p − ½)) for p ∈ [¼, ¾] (p − ½ is exact there), −1/tan(π·p) below, 1/tan(π(1 − p))
/// above (1 − p is exact). Relative error ≤ 4 ulp; w(0) = −∞, w(1) = +∞.
template <Real T>
inline T standard_quantile(T p) noexcept {
  if (p < T(0.25)) return T(-1) / std::tan(pi<T> * p);
  if (p > T(0.75)) return T(1) / std::tan(pi<T> * (T(1) - p));
  return std::tan(pi<T> * (p - T(0.5)));
}

/// quantile(p) = loc + scale·tan(π(p − ½)), the x with cdf(x) = p. See standard_quantile.
template <Real T>
inline T quantile(T p, T loc, T scale) noexcept {
  return loc + scale * standard_quantile(p);
}
/// quantile and ∂/∂p = π·scale·(1 + w²), ∂/∂loc = 1, ∂/∂scale = w, w = standard_quantile(p).
template <Real T>
inline QuantileGrad<T> quantile_grad(T p, T loc, T scale) noexcept {
  const T w = standard_quantile(p);
  return {loc + scale * w, pi<T> * scale * (T(1) + w * w), T(1), w};
}

/// A draw of Cauchy(loc, scale) from a uniform u ∈ (0, 1) by inversion: sample(u) = quantile(u)
/// exactly (the reparameterisation x = loc + scale·w(u); ∂x/∂loc = 1, ∂x/∂scale = w(u)).
template <Real T>
inline T sample(T u, T loc, T scale) noexcept {
  return quantile(u, loc, scale);
}
template <Real T>
inline QuantileGrad<T> sample_grad(T u, T loc, T scale) noexcept {
  return quantile_grad(u, loc, scale);
}

}  // namespace raw

// ------------------------------------------------------------------ checked entry points

namespace detail {
template <Real T>
inline void check_scale(T scale, const char* fn) {
  require(scale > T(0), fn, "scale must be > 0, got {}", scale);
}
template <Real T>
inline void check_probability(T p, const char* fn, const char* name) {
  require(p > T(0) && p < T(1), fn, "{} must lie in (0, 1), got {}", name, p);
}
}  // namespace detail

// Each checked function validates scale (and p/u) and forwards to raw::.
#define CAUSALQWEN_CHECKED_XLS(fn, Ret)                      \
  template <Real T>                                          \
  inline Ret fn(T x, T loc, T scale) {                       \
    detail::check_scale(scale, #fn);                         \
    return raw::fn(x, loc, scale);                           \
  }
#define CAUSALQWEN_CHECKED_PLS(fn, Ret, pname)               \
  template <Real T>                                          \
  inline Ret fn(T p, T loc, T scale) {                       \
    detail::check_scale(scale, #fn);                         \
    detail::check_probability(p, #fn, pname);                \
    return raw::fn(p, loc, scale);                           \
  }

/// pdf(x, loc, scale) = 1/(π·scale·(1 + ((x − loc)/scale)²)).
CAUSALQWEN_CHECKED_XLS(pdf, T)
CAUSALQWEN_CHECKED_XLS(pdf_grad, CauchyGrad<T>)
/// log pdf(x, loc, scale) = −nll(x, loc, scale).
CAUSALQWEN_CHECKED_XLS(log_pdf, T)
CAUSALQWEN_CHECKED_XLS(log_pdf_grad, CauchyGrad<T>)
/// nll(y, loc, scale) = log(π·scale) + log1p(((y − loc)/scale)²).
CAUSALQWEN_CHECKED_XLS(nll, T)
CAUSALQWEN_CHECKED_XLS(nll_grad, CauchyGrad<T>)
/// cdf(x, loc, scale) = P(X ≤ x) = ½ + atan((x − loc)/scale)/π.
CAUSALQWEN_CHECKED_XLS(cdf, T)
CAUSALQWEN_CHECKED_XLS(cdf_grad, CauchyGrad<T>)
/// log_cdf(x, loc, scale) = log P(X ≤ x).
CAUSALQWEN_CHECKED_XLS(log_cdf, T)
CAUSALQWEN_CHECKED_XLS(log_cdf_grad, CauchyGrad<T>)
/// sf(x, loc, scale) = P(X > x) = 1 − cdf.
CAUSALQWEN_CHECKED_XLS(sf, T)
CAUSALQWEN_CHECKED_XLS(sf_grad, CauchyGrad<T>)
/// log_sf(x, loc, scale) = log P(X > x).
CAUSALQWEN_CHECKED_XLS(log_sf, T)
CAUSALQWEN_CHECKED_XLS(log_sf_grad, CauchyGrad<T>)
/// quantile(p, loc, scale) = loc + scale·tan(π(p − ½)), p ∈ (0, 1).
CAUSALQWEN_CHECKED_PLS(quantile, T, "p")
CAUSALQWEN_CHECKED_PLS(quantile_grad, QuantileGrad<T>, "p")
/// sample(u, loc, scale) = quantile(u, loc, scale) for a uniform u ∈ (0, 1).
CAUSALQWEN_CHECKED_PLS(sample, T, "u")
CAUSALQWEN_CHECKED_PLS(sample_grad, QuantileGrad<T>, "u")

#undef CAUSALQWEN_CHECKED_XLS
#undef CAUSALQWEN_CHECKED_PLS

}  // namespace causalqwen
