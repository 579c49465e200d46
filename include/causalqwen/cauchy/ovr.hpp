/// One-vs-rest (OvR) classification with Cauchy decision scores S ~ Cauchy(loc, scale):
///   P = P(S > threshold) = ½ + atan((loc − threshold)/scale)/π,
///   BCE(y, P) = −[y·log P + (1 − y)·log(1 − P)],
/// with log P and log(1 − P) in the stable atan2/log1p forms of distribution.hpp (no ε), accurate
/// for |z| = |loc − threshold|/scale from 0 to 1e30 and at ±∞. `ovr_bce_eps` gives the original
/// CausalQwen formulation's ε = 1e-7 form as an option (it saturates at −log ε ≈ 16.1 and loses the gradient there).
#pragma once
#include <causalqwen/cauchy/distribution.hpp>

namespace causalqwen {

/// A value and its partials with respect to loc, scale and the threshold.
template <Real T>
struct OvrGrad {
  T value;
  T d_loc;
  T d_scale;
  T d_threshold;
};

namespace raw {

/// z = (loc − threshold)/scale, the standardised margin of the decision score.
template <Real T>
inline T ovr_margin(T loc, T scale, T threshold) noexcept {
  return (loc - threshold) / scale;
}

/// Partials of g(z), z = (loc − threshold)/scale, with respect to loc, scale and threshold.
template <Real T>
inline OvrGrad<T> chain_ovr(StandardGrad<T> g, T scale) noexcept {
  const T d_loc = g.dz / scale;
  return {g.value, d_loc, -g.z_dz / scale, -d_loc};
}

/// P(S > threshold) = ½ + atan((loc − threshold)/scale)/π, which is the Cauchy cdf with the
/// roles of x and loc exchanged: cdf(x = loc; loc = threshold, scale). Relative error ≤ 3 ulp.
template <Real T>
inline T ovr_prob(T loc, T scale, T threshold) noexcept {
  return cdf(loc, threshold, scale);
}
/// P and ∂P/∂loc = 1/(π·scale·(1+z²)), ∂P/∂scale = −z·∂P/∂loc, ∂P/∂threshold = −∂P/∂loc.
template <Real T>
inline OvrGrad<T> ovr_prob_grad(T loc, T scale, T threshold) noexcept {
  const auto g = cdf_grad(loc, threshold, scale);
  return {g.value, g.d_x, g.d_scale, g.d_loc};
}

/// log P, stable in both tails (relative error ≤ 4 ulp).
template <Real T>
inline T ovr_log_prob(T loc, T scale, T threshold) noexcept {
  return standard_log_cdf_grad(ovr_margin(loc, scale, threshold)).value;
}
/// log(1 − P), stable in both tails (relative error ≤ 4 ulp).
template <Real T>
inline T ovr_log_1m_prob(T loc, T scale, T threshold) noexcept {
  return standard_log_cdf_grad(-ovr_margin(loc, scale, threshold)).value;
}

/// BCE(y, P) = −[y·log P + (1 − y)·log(1 − P)] for a label y ∈ [0, 1] (a term whose
/// coefficient is 0 is left out, so y = 1 at P = 0 gives +∞, never NaN). Absolute error
/// ≤ 4 ulp of max(1, BCE) for |z| ≤ 1e30; BCE(0, z = −∞) = 0, BCE(0, z = +∞) = +∞.
template <Real T>
inline OvrGrad<T> ovr_bce_grad(T y, T loc, T scale, T threshold) noexcept {
  const T z = ovr_margin(loc, scale, threshold);
  const auto log_p = standard_log_cdf_grad(z);     // log P(z)
  const auto log_q = standard_log_cdf_grad(-z);    // log(1 − P(z)) = log P(−z)
  T value = T(0), dz = T(0), z_dz = T(0);
  if (y != T(0)) {
    value -= y * log_p.value;
    dz -= y * log_p.dz;
    z_dz -= y * log_p.z_dz;
  }
  if (y != T(1)) {
    value -= (T(1) - y) * log_q.value;
    dz += (T(1) - y) * log_q.dz;       // d/dz log P(−z) = −P'(−z)/P(−z)
    z_dz -= (T(1) - y) * log_q.z_dz;   // z·d/dz log P(−z) = (−z)·(log P)'(−z)
  }
  return chain_ovr<T>({value, dz, z_dz}, scale);
}
template <Real T>
inline T ovr_bce(T y, T loc, T scale, T threshold) noexcept {
  return ovr_bce_grad(y, loc, scale, threshold).value;
}

/// The original formulation's form −[y·log(P + ε) + (1 − y)·log(1 − P + ε)] with P = ½ + atan(z)/π, kept as an
/// option for comparison with the original code (default ε = 1e-7). Not accurate in the tails.
template <Real T>
inline OvrGrad<T> ovr_bce_eps_grad(T y, T loc, T scale, T threshold, T eps = T(1e-7)) noexcept {
  const T z = ovr_margin(loc, scale, threshold);
  const T p = T(0.5) + std::atan(z) / pi<T>;
  const T value = -(y * std::log(p + eps) + (T(1) - y) * std::log(T(1) - p + eps));
  const T dl_dp = -(y / (p + eps) - (T(1) - y) / (T(1) - p + eps));
  return chain_ovr<T>({value, dl_dp * inv_one_plus_sq(z) / pi<T>,
                       dl_dp * z_over_one_plus_sq(z) / pi<T>},
                      scale);
}
template <Real T>
inline T ovr_bce_eps(T y, T loc, T scale, T threshold, T eps = T(1e-7)) noexcept {
  return ovr_bce_eps_grad(y, loc, scale, threshold, eps).value;
}

}  // namespace raw

// ------------------------------------------------------------------ checked entry points

namespace detail {
template <Real T>
inline void check_label(T y, const char* fn) {
  require(y >= T(0) && y <= T(1), fn, "label y must lie in [0, 1], got {}", y);
}
}  // namespace detail

/// P(S > threshold) for S ~ Cauchy(loc, scale) = ½ + atan((loc − threshold)/scale)/π.
template <Real T>
inline T ovr_prob(T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_prob");
  return raw::ovr_prob(loc, scale, threshold);
}
template <Real T>
inline OvrGrad<T> ovr_prob_grad(T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_prob_grad");
  return raw::ovr_prob_grad(loc, scale, threshold);
}
/// log P(S > threshold), stable.
template <Real T>
inline T ovr_log_prob(T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_log_prob");
  return raw::ovr_log_prob(loc, scale, threshold);
}
/// log P(S ≤ threshold) = log(1 − P), stable.
template <Real T>
inline T ovr_log_1m_prob(T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_log_1m_prob");
  return raw::ovr_log_1m_prob(loc, scale, threshold);
}
/// BCE(y, P) = −[y·log P + (1 − y)·log(1 − P)], no ε; y ∈ [0, 1].
template <Real T>
inline T ovr_bce(T y, T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_bce");
  detail::check_label(y, "ovr_bce");
  return raw::ovr_bce(y, loc, scale, threshold);
}
template <Real T>
inline OvrGrad<T> ovr_bce_grad(T y, T loc, T scale, T threshold) {
  detail::check_scale(scale, "ovr_bce_grad");
  detail::check_label(y, "ovr_bce_grad");
  return raw::ovr_bce_grad(y, loc, scale, threshold);
}
/// The original formulation's ε-form of the OvR BCE (see raw::ovr_bce_eps_grad).
template <Real T>
inline T ovr_bce_eps(T y, T loc, T scale, T threshold, T eps = T(1e-7)) {
  detail::check_scale(scale, "ovr_bce_eps");
  detail::check_label(y, "ovr_bce_eps");
  return raw::ovr_bce_eps(y, loc, scale, threshold, eps);
}
template <Real T>
inline OvrGrad<T> ovr_bce_eps_grad(T y, T loc, T scale, T threshold, T eps = T(1e-7)) {
  detail::check_scale(scale, "ovr_bce_eps_grad");
  detail::check_label(y, "ovr_bce_eps_grad");
  return raw::ovr_bce_eps_grad(y, loc, scale, threshold, eps);
}

}  // namespace causalqwen
