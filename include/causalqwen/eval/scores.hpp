/// Proper scores of one predictive distribution against one observed value y (lower is better):
/// the continuous ranked probability score, the interval score of a central interval, the
/// pinball (quantile) loss and the negative log-likelihood, for a Cauchy(loc, scale) forecast, a
/// Gaussian N(mu, sigma²) forecast and a point forecast c.
///
///   CRPS(F, y)  = ∫ (F(x) − 1{y ≤ x})² dx
///     Cauchy:   (2σ/π)·[z·atan z − ½·log(1 + z²) + log 2],   z = (y − loc)/σ
///     Gaussian: σ·[z·(2Φ(z) − 1) + 2φ(z) − 1/√π],           z = (y − mu)/σ
///     point c:  |y − c|
///   IS_α(l, u; y) = (u − l) + (2/α)(l − y)·1{y < l} + (2/α)(y − u)·1{y > u}
///   ρ_τ(y − q)   = (τ − 1{y < q})·(y − q),  q the τ-quantile of the forecast
///
/// The Cauchy CRPS is finite although the Cauchy has no mean; its kernel form
/// E|X − y| − ½E|X − X′| is ∞ − ∞ and is never used. For |z| ≥ 1 it is evaluated in terms of
/// d = |y − loc| (z·atan z = d/σ·(π/2 − atan(σ/d)), ½·log(1 + z²) = log d − log σ + ½·log1p((σ/d)²)),
/// so that no z² is formed: finite and accurate for |z| up to the largest finite value.
#pragma once
#include "causalqwen/cauchy/distribution.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>

namespace causalqwen::eval {

/// The levels τ = 0.05, 0.10, …, 0.95 of the pinball loss's grid.
inline constexpr std::size_t pinball_level_count = 19;
inline constexpr std::array<double, pinball_level_count> pinball_levels = [] {
  std::array<double, pinball_level_count> levels{};
  for (std::size_t i = 0; i < pinball_level_count; ++i) levels[i] = 0.05 * static_cast<double>(i + 1);
  return levels;
}();

/// CRPS of Cauchy(loc, scale) at y = (2σ/π)·[z·atan z − ½·log(1 + z²) + log 2], z = (y − loc)/σ;
/// for |z| ≥ 1, with d = |y − loc|:
///   d·(2/π)·atan(d/σ) − (2σ/π)·(log d − log σ + ½·log1p((σ/d)²) − log 2),
/// where (2/π)·atan(d/σ) = 1 − (2/π)·atan(σ/d). +∞ when y or loc is infinite; NaN for NaN input.
template <Real T>
inline T cauchy_crps(T y, T loc, T scale) noexcept {
  const T d = std::fabs(y - loc);
  if (std::isnan(d) || std::isnan(scale)) return std::numeric_limits<T>::quiet_NaN();
  if (std::isinf(d)) return std::numeric_limits<T>::infinity();
  const T two_over_pi = T(2) / std::numbers::pi_v<T>;
  const T ln2 = std::numbers::ln2_v<T>;
  if (d < scale) {
    const T z = d / scale;
    return two_over_pi * scale * (z * std::atan(z) - T(0.5) * std::log1p(z * z) + ln2);
  }
  const T r = scale / d;  // 1/|z| ∈ (0, 1]
  return d * (T(1) - two_over_pi * std::atan(r)) -
         two_over_pi * scale * (std::log(d) - std::log(scale) + T(0.5) * std::log1p(r * r) - ln2);
}

/// Φ(z), the standard normal distribution function, as ½·erfc(−z/√2) (accurate in both tails).
template <Real T>
inline T normal_cdf(T z) noexcept {
  return T(0.5) * std::erfc(-z / std::numbers::sqrt2_v<T>);
}

/// φ(z) = exp(−z²/2)/√(2π).
template <Real T>
inline T normal_pdf(T z) noexcept {
  return std::exp(T(-0.5) * z * z) * (std::numbers::inv_sqrtpi_v<T> / std::numbers::sqrt2_v<T>);
}

/// Φ⁻¹(p), the standard normal quantile: Acklam's rational approximation (relative error
/// ≤ 1.2e-9), refined by one Halley step on Φ(x) − p in double; −∞ at 0, +∞ at 1, NaN outside.
inline double normal_quantile(double p) noexcept {
  if (!(p >= 0 && p <= 1)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0) return -std::numeric_limits<double>::infinity();
  if (p == 1) return std::numeric_limits<double>::infinity();
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                          6.680131188771972e+01,  -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double low = 0.02425;
  double x;
  if (p < low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - low) {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // Halley: e = Φ(x) − p (from the nearer tail), u = e/φ(x), x ← x − u/(1 + x·u/2)
  const double e = p < 0.5 ? normal_cdf(x) - p : (1 - p) - normal_cdf(-x);
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

/// CRPS of N(mu, sigma²) at y = σ·[z·(2Φ(z) − 1) + 2φ(z) − 1/√π], z = (y − mu)/σ, written with
/// d = |y − mu| as d·erf(d/(σ√2)) + σ·(2φ(d/σ) − 1/√π) (no z formed when d/σ would overflow).
template <Real T>
inline T gaussian_crps(T y, T mu, T sigma) noexcept {
  const T d = std::fabs(y - mu);
  if (std::isnan(d) || std::isnan(sigma)) return std::numeric_limits<T>::quiet_NaN();
  if (std::isinf(d)) return std::numeric_limits<T>::infinity();
  const T z = d / sigma;
  return d * std::erf(z / std::numbers::sqrt2_v<T>) + sigma * (T(2) * normal_pdf(z) - std::numbers::inv_sqrtpi_v<T>);
}

/// CRPS of a point forecast c (a distribution all at c) = |y − c|.
template <Real T>
inline T point_crps(T y, T c) noexcept {
  return std::fabs(y - c);
}

/// IS_α(l, u; y) = (u − l) + (2/α)(l − y)·1{y < l} + (2/α)(y − u)·1{y > u}, the interval score of
/// the central interval [l, u] of level 1 − α (α ∈ (0, 1)).
template <Real T>
inline T interval_score(T lower, T upper, T y, T alpha) noexcept {
  T score = upper - lower;
  if (y < lower) score += T(2) / alpha * (lower - y);
  if (y > upper) score += T(2) / alpha * (y - upper);
  return score;
}

/// ρ_τ(y − q) = (τ − 1{y < q})·(y − q), the pinball loss of the quantile q at level τ.
template <Real T>
inline T pinball_loss(T y, T q, T tau) noexcept {
  const T e = y - q;
  return e < T(0) ? (tau - T(1)) * e : tau * e;
}

/// The mean pinball loss over τ ∈ pinball_levels of the Cauchy quantiles
/// q_τ = loc + scale·tan(π(τ − ½)).
template <Real T>
inline T cauchy_mean_pinball(T y, T loc, T scale) noexcept {
  T total = 0;
  for (double tau : pinball_levels) total += pinball_loss(y, raw::quantile(T(tau), loc, scale), T(tau));
  return total / T(pinball_level_count);
}

/// The mean pinball loss over τ ∈ pinball_levels of the Gaussian quantiles q_τ = mu + sigma·Φ⁻¹(τ).
template <Real T>
inline T gaussian_mean_pinball(T y, T mu, T sigma) noexcept {
  T total = 0;
  for (double tau : pinball_levels) total += pinball_loss(y, mu + sigma * T(normal_quantile(tau)), T(tau));
  return total / T(pinball_level_count);
}

/// The mean pinball loss over τ ∈ pinball_levels of a point forecast c (every quantile is c):
/// mean_τ ρ_τ(y − c).
template <Real T>
inline T point_mean_pinball(T y, T c) noexcept {
  T total = 0;
  for (double tau : pinball_levels) total += pinball_loss(y, c, T(tau));
  return total / T(pinball_level_count);
}

/// Cauchy NLL = log(π·scale) + log1p(((y − loc)/scale)²) (raw::nll's stable form).
template <Real T>
inline T cauchy_nll(T y, T loc, T scale) noexcept {
  return raw::nll(y, loc, scale);
}

/// Gaussian NLL = ½·log(2π) + log σ + ½·((y − mu)/σ)².
template <Real T>
inline T gaussian_nll(T y, T mu, T sigma) noexcept {
  const T z = (y - mu) / sigma;
  return T(0.5) * std::log(T(2) * std::numbers::pi_v<T>) + std::log(sigma) + T(0.5) * z * z;
}

/// The half-width, in units of the scale, of the central interval of level p of the standard
/// Cauchy: tan(π·p/2) (the quantile of ½ + p/2).
inline double cauchy_half_width(double level) noexcept { return raw::standard_quantile(0.5 + 0.5 * level); }

/// The half-width, in units of σ, of the central interval of level p of the standard normal:
/// Φ⁻¹(½ + p/2).
inline double gaussian_half_width(double level) noexcept { return normal_quantile(0.5 + 0.5 * level); }

}  // namespace causalqwen::eval
