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
#include "causalqwen/model/regression_head.hpp"

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

/// Φ, φ and Φ⁻¹ of the standard normal (model/regression_head.hpp, where the Gaussian head's
/// loss is).
using model::normal_cdf;
using model::normal_pdf;
using model::normal_quantile;

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

/// Gaussian NLL = ½·log(2π) + log σ + ½·((y − mu)/σ)² (the Gaussian head's training loss).
template <Real T>
inline T gaussian_nll(T y, T mu, T sigma) noexcept {
  return model::gaussian_nll_grad(y, mu, sigma).value;
}

/// The half-width, in units of the scale, of the central interval of level p of the standard
/// Cauchy: tan(π·p/2) (the quantile of ½ + p/2).
inline double cauchy_half_width(double level) noexcept { return raw::standard_quantile(0.5 + 0.5 * level); }

/// The half-width, in units of σ, of the central interval of level p of the standard normal:
/// Φ⁻¹(½ + p/2).
inline double gaussian_half_width(double level) noexcept { return normal_quantile(0.5 + 0.5 * level); }

}  // namespace causalqwen::eval
