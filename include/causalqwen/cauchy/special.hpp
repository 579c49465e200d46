/// Scalar building blocks shared by the Cauchy functions: constants, the small-side angle,
/// 1/(1+z²) and z/(1+z²) without overflow, and softplus with its inverse and logarithm.
///
/// Every scalar function here comes in two forms:
///   causalqwen::raw::f(...)  unchecked, noexcept, for hot loops (garbage in, garbage out);
///   causalqwen::f(...)       checked: throws DomainError naming the function and argument.
/// `*_grad` companions return the value together with its analytic partial derivatives. Arrays
/// of softplus and σ run through the expression templates (autodiff/functions.hpp's `Softplus`
/// and `Sigmoid`), which give these scalar forms' bits with the exponentials and logarithms
/// 16 at a time in float.
#pragma once
#include <causalqwen/core/error.hpp>

#include <cmath>
#include <concepts>
#include <limits>
#include <numbers>

namespace causalqwen {

/// The floating-point types the Cauchy math is defined for: float, double, long double.
template <class T>
concept Real = std::floating_point<T>;

/// A value with its derivative with respect to the single argument.
template <Real T>
struct ValueGrad {
  T value;
  T d_x;
};

namespace raw {

template <Real T>
inline constexpr T pi = std::numbers::pi_v<T>;
/// log(π), correctly rounded for every Real T.
template <Real T>
inline constexpr T log_pi = static_cast<T>(1.14472988584940017414342735135305871164729481291531L);

/// θ(t) = atan2(1, t) ∈ [0, π/2] for t ≥ 0: π times the "small side" probability of a standard
/// Cauchy variable beyond |z| = t, i.e. P(Z > t) = θ(t)/π. Exact limits: θ(0) = π/2, θ(∞) = 0.
/// Accuracy: that of std::atan2 (≤ 1 ulp in glibc).
template <Real T>
inline T small_side_angle(T t) noexcept {
  return std::atan2(T(1), t);
}

/// 1/(1+z²) without overflow: for |z| > 1 it is u²/(1+u²) with u = 1/z. Relative error ≤ 2 ulp.
template <Real T>
inline T inv_one_plus_sq(T z) noexcept {
  const T t = std::fabs(z);
  if (t > T(1)) {
    const T u = T(1) / t;
    return u * u / (T(1) + u * u);
  }
  return T(1) / (T(1) + t * t);
}

/// z/(1+z²) without overflow: for |z| > 1 it is u/(1+u²) with u = 1/z; 0 at ±∞. ≤ 2 ulp.
template <Real T>
inline T z_over_one_plus_sq(T z) noexcept {
  if (std::fabs(z) > T(1)) {
    const T u = T(1) / z;
    return u / (T(1) + u * u);
  }
  return z / (T(1) + z * z);
}

/// Derivative of log(θ(t)/π) with respect to -t, as the pair (f, t·f) with
///   f = 1 / ((1+t²)·θ(t))   (> 0; the derivative of the log of the small side, t ≥ 0),
/// computed without overflow; the limits at t = ∞ are f = 0 and t·f = 1.
template <Real T>
struct SmallSideSlope {
  T slope;    // 1/((1+t²)θ)
  T t_slope;  // t/((1+t²)θ)
};
template <Real T>
inline SmallSideSlope<T> small_side_slope(T t, T theta) noexcept {
  if (theta == T(0)) return {T(0), T(1)};  // t = ∞
  if (t > T(1)) {  // u = 1/t and θ ≈ u: keep u/θ ≈ 1 together so nothing underflows
    const T u = T(1) / t;
    const T u_over_theta = u / theta;
    const T den = T(1) + u * u;
    return {u_over_theta * u / den, u_over_theta / den};
  }
  const T den_theta = (T(1) + t * t) * theta;
  return {T(1) / den_theta, t / den_theta};
}

/// softplus(x) = log(1 + eˣ) = max(x, 0) + log1p(e^{−|x|}). Relative error ≤ 2 ulp for all x;
/// softplus(−∞) = 0, softplus(+∞) = +∞.
template <Real T>
inline T softplus(T x) noexcept {
  return std::fmax(x, T(0)) + std::log1p(std::exp(-std::fabs(x)));
}

/// σ(x) = 1/(1 + e^{−x}) = d softplus/dx, computed from e^{−|x|} so it never overflows.
template <Real T>
inline T sigmoid(T x) noexcept {
  const T e = std::exp(-std::fabs(x));
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

/// softplus(x) and d/dx = σ(x).
template <Real T>
inline ValueGrad<T> softplus_grad(T x) noexcept {
  return {softplus(x), sigmoid(x)};
}

/// softplus⁻¹(y) = log(eʸ − 1) = y + log(−expm1(−y)) for y > 0. Relative error ≤ 3 ulp for
/// y ∈ [1e-300, 1e300] (double); inv_softplus(+∞) = +∞, inv_softplus(0) = −∞.
template <Real T>
inline T inv_softplus(T y) noexcept {
  return y + std::log(-std::expm1(-y));
}

/// softplus⁻¹(y) and d/dy = 1/(1 − e^{−y}) = −1/expm1(−y).
template <Real T>
inline ValueGrad<T> inv_softplus_grad(T y) noexcept {
  const T em1 = -std::expm1(-y);  // 1 − e^{−y} ∈ (0, 1]
  return {y + std::log(em1), T(1) / em1};
}

/// log(softplus(x)). For x < 0 it is x + log(log1p(w)/w) with w = eˣ, which stays exact when
/// softplus(x) underflows (log_softplus(−1000) = −1000). Relative error ≤ 3 ulp.
template <Real T>
inline T log_softplus(T x) noexcept {
  if (x < T(0)) {
    const T w = std::exp(x);
    return w == T(0) ? x : x + std::log(std::log1p(w) / w);
  }
  return std::log(softplus(x));
}

/// log(softplus(x)) and d/dx = σ(x)/softplus(x) (→ 1 as x → −∞, → 1/x as x → +∞).
template <Real T>
inline ValueGrad<T> log_softplus_grad(T x) noexcept {
  if (x < T(0)) {
    const T w = std::exp(x);
    if (w == T(0)) return {x, T(1)};
    const T ratio = std::log1p(w) / w;  // softplus(x)/eˣ ∈ (log 2, 1]
    return {x + std::log(ratio), T(1) / ((T(1) + w) * ratio)};
  }
  const T sp = softplus(x);
  return {std::log(sp), sigmoid(x) / sp};
}

}  // namespace raw

// ------------------------------------------------------------------ checked entry points

/// softplus(x) = log(1 + eˣ); any x (NaN propagates). See raw::softplus.
template <Real T>
inline T softplus(T x) noexcept {
  return raw::softplus(x);
}
template <Real T>
inline ValueGrad<T> softplus_grad(T x) noexcept {
  return raw::softplus_grad(x);
}

/// softplus⁻¹(y) = y + log(−expm1(−y)); throws DomainError unless y > 0.
template <Real T>
inline T inv_softplus(T y) {
  detail::require(y > T(0), "inv_softplus", "y must be > 0, got {}", y);
  return raw::inv_softplus(y);
}
template <Real T>
inline ValueGrad<T> inv_softplus_grad(T y) {
  detail::require(y > T(0), "inv_softplus_grad", "y must be > 0, got {}", y);
  return raw::inv_softplus_grad(y);
}

/// log(softplus(x)); any x. See raw::log_softplus.
template <Real T>
inline T log_softplus(T x) noexcept {
  return raw::log_softplus(x);
}
template <Real T>
inline ValueGrad<T> log_softplus_grad(T x) noexcept {
  return raw::log_softplus_grad(x);
}

}  // namespace causalqwen
