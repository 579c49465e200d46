/// How the regression head's output (loc_Y, scale_Y) is read, and the loss of one number y under
/// each reading, with its partial derivatives (the heads' parameters are the same for all three):
///
///   cauchy    Y ~ Cauchy(loc_Y, scale_Y)   loss = log(π·scale_Y) + log1p(r²),   r = (y − loc_Y)/scale_Y
///   gaussian  Y ~ N(loc_Y, scale_Y²)       loss = ½·log(2π) + log scale_Y + ½·r²
///   mse       Y = loc_Y (a point)          loss = ½·(y − loc_Y)²
///
/// scale_Y = |w_reg|·scale_A is a positive combination of softplus outputs (the abduction's
/// scale_U = softplus(W_scale z + b_scale), plus |b_noise|), so the Gaussian reading is a head
/// with "loc and a softplus scale". The mse loss is the Gaussian loss at σ = 1 less its constant
/// ½·log(2π): the same λ (reg_loss_weight) and the same gate weigh it as they weigh the Cauchy
/// NLL, and its gradient ∂/∂loc = loc − y is the Gaussian's at σ = 1. It does not depend on
/// scale_Y (∂/∂scale = 0).
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string_view>

namespace causalqwen::model {

/// The reading of the regression head (see the file comment).
enum class RegHead { cauchy, gaussian, mse };

inline constexpr std::array<RegHead, 3> reg_heads = {RegHead::cauchy, RegHead::gaussian, RegHead::mse};

/// "cauchy", "gaussian" or "mse" (config.json's reg_head, train's --reg-head).
inline std::string_view reg_head_name(RegHead head) {
  switch (head) {
    case RegHead::gaussian: return "gaussian";
    case RegHead::mse: return "mse";
    case RegHead::cauchy: break;
  }
  return "cauchy";
}

/// reg_head_name's inverse, or false for any other name.
inline bool parse_reg_head(std::string_view name, RegHead& head) {
  for (auto h : reg_heads)
    if (reg_head_name(h) == name) {
      head = h;
      return true;
    }
  return false;
}

/// Whether the head forecasts a distribution (cauchy, gaussian) or a point (mse).
inline bool has_scale(RegHead head) { return head != RegHead::mse; }

/// One number's loss and its partials ∂/∂loc, ∂/∂scale.
template <Real T>
struct RegressionLossGrad {
  T value, d_loc, d_scale;
};

/// Gaussian NLL = ½·log(2π) + log σ + ½·r², r = (y − μ)/σ, with ∂/∂μ = −r/σ and
/// ∂/∂σ = (1 − r²)/σ: as (1 − r)(1 + r)/σ for |r| < 2 (no cancellation near r = 1), else as
/// 1/σ − r·(r/σ) (no r² formed where r·r/σ would overflow while the result does not).
/// ½·r² is formed as (½·r)·r. +∞ (and infinite partials) once r² passes the largest value.
template <Real T>
inline RegressionLossGrad<T> gaussian_nll_grad(T y, T mu, T sigma) noexcept {
  const T r = (y - mu) / sigma;
  const T half_log_two_pi = T(0.5) * std::log(T(2) * std::numbers::pi_v<T>);
  const T value = half_log_two_pi + std::log(sigma) + (T(0.5) * r) * r;
  const T d_scale = std::fabs(r) < T(2) ? (T(1) - r) * (T(1) + r) / sigma : T(1) / sigma - r * (r / sigma);
  return {value, -r / sigma, d_scale};
}

/// ½·(y − c)², with ∂/∂c = c − y and ∂/∂scale = 0.
template <Real T>
inline RegressionLossGrad<T> half_squared_error_grad(T y, T c) noexcept {
  const T e = c - y;
  return {(T(0.5) * e) * e, e, T(0)};
}

/// The loss of `head` for the number y given (loc, scale), with its partials (see the file comment).
template <Real T>
inline RegressionLossGrad<T> regression_loss_grad(RegHead head, T y, T loc, T scale) noexcept {
  switch (head) {
    case RegHead::gaussian: return gaussian_nll_grad(y, loc, scale);
    case RegHead::mse: return half_squared_error_grad(y, loc);
    case RegHead::cauchy: break;
  }
  const auto g = raw::nll_grad(y, loc, scale);
  return {g.value, g.d_loc, g.d_scale};
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

}  // namespace causalqwen::model
