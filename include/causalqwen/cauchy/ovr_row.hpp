/// The hot-path OvR kernels over one row of classes (one position × K classes, K up to
/// 151,936), vectorised with xsimd (the SIMD engine xtensor evaluates with): one fused pass
/// computes z, atan2, both logs, the loss and its gradients, so nothing is stored but the
/// outputs. float and double use xsimd batches; long double falls back to the scalar forms.
///
/// Unchecked (raw) by design: scale must be > 0 and the spans must have equal lengths; the
/// caller (the model's loss head) validates once per tensor, not per element.
#pragma once
#include <causalqwen/cauchy/ovr.hpp>
#include <causalqwen/core/xt.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

namespace causalqwen {

/// Thresholds of a row: one value for every class (`per_class == false`), or one per class.
template <Real T>
struct RowThresholds {
  const T* values;
  bool per_class;

  static RowThresholds scalar(const T& threshold) { return {&threshold, false}; }
  static RowThresholds per_class_span(std::span<const T> thresholds) {
    return {thresholds.data(), true};
  }
  T at(std::size_t k) const { return per_class ? values[k] : values[0]; }
};

/// Where ovr_bce_row writes gradients. d_loc and d_scale ([K]) are written (=); d_threshold
/// is accumulated (+=) because thresholds are shared by every row: [K] for per-class
/// thresholds, a single value for a scalar threshold. Any pointer may be null (not wanted).
template <Real T>
struct OvrRowGrads {
  T* d_loc = nullptr;
  T* d_scale = nullptr;
  T* d_threshold = nullptr;
};

/// Optional by-products of ovr_bce_row over the same row: Σ_k P_k and argmax_k P_k (the class
/// with the largest margin z_k = (loc_k − C_k)/scale_k; ties go to the lowest index).
template <Real T>
struct OvrRowStats {
  T prob_sum = T(0);
  T best_margin = -std::numeric_limits<T>::infinity();
  std::int64_t best_index = -1;

  /// Folds in class k with margin z and probability p (used by the scalar paths).
  void add(std::size_t k, T z, T p) {
    prob_sum += p;
    if (z > best_margin) {
      best_margin = z;
      best_index = static_cast<std::int64_t>(k);
    }
  }
};

namespace detail {

template <class T>
inline constexpr bool simd_row_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// One batch of classes, all taken as negatives (label 0):
///   L = −log(1 − P) = log π − log θ(z) for z > 0,  −log1p(−θ(|z|)/π) otherwise,
///   g = dL/dz = (1/(1+z²))/θ or (1/(1+z²))/(π − θ),  gz = z·g,
/// with θ = atan2(1, |z|) and the limits g = 0, gz = 1 at z = +∞.
template <class B, class V>
inline void ovr_negative_batch(const B& z, B& loss, B& g, B& gz, B& theta_out) noexcept {
  using std::numbers::pi_v;
  const B one(V(1));
  const B t = xsimd::abs(z);
  const B theta = xsimd::atan2(one, t);
  const auto pos = z > B(V(0));
  const auto big = t > one;
  const B u = xsimd::select(big, one / t, t);  // min(t, 1/t)
  const B den = one + u * u;
  // each lane's loss from its own branch; a batch whose lanes all take one branch computes only
  // that one (most classes of a row lie below their threshold), with the same bits
  if (xsimd::none(pos))
    loss = -xsimd::log1p(-theta / B(pi_v<V>));
  else if (xsimd::all(pos))
    loss = B(raw::log_pi<V>) - xsimd::log(theta);
  else
    loss = xsimd::select(pos, B(raw::log_pi<V>) - xsimd::log(theta), -xsimd::log1p(-theta / B(pi_v<V>)));
  const B rest = xsimd::select(pos, theta, B(pi_v<V>) - theta);  // π·(1 − P)
  // g = 1/((1+z²)·rest): for |z| > 1 as (u/rest)·(u/(1+u²)), so u/θ ≈ 1 stays together and
  // nothing underflows; gz = z·g = ±(u/rest)/(1+u²) in both regimes.
  const B v = xsimd::select(big, u, one);
  const auto at_inf = pos & (theta == B(V(0)));  // z = +∞ (at −∞, u = 0 gives g = gz = 0 as they are)
  g = xsimd::select(at_inf, B(V(0)), (v / rest) * (v / den));
  gz = xsimd::select(at_inf, one, xsimd::select(pos, u, -u) / rest / den);
  theta_out = theta;
}

template <Real T, bool PerClass>
inline T ovr_bce_row_simd(const T* loc, const T* scale, const T* thr, std::size_t K,
                          std::size_t skip, T weight, OvrRowGrads<T> out,
                          OvrRowStats<T>* stats) noexcept {
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size;
  B loss_acc(T(0)), dthr_acc(T(0));
  B prob_acc(T(0)), best_z(-std::numeric_limits<T>::infinity()), best_k(T(-1));
  alignas(64) T lane_index[W];
  for (std::size_t i = 0; i < W; ++i) lane_index[i] = static_cast<T>(i);
  const B lanes = B::load_aligned(lane_index);
  alignas(64) T tail_loc[W], tail_scale[W], tail_thr[W], tail_dloc[W], tail_dscale[W];
  const B w(weight);
  for (std::size_t k0 = 0; k0 < K; k0 += W) {
    const std::size_t n = std::min(W, K - k0);
    const T *lp = loc + k0, *sp = scale + k0, *tp = PerClass ? thr + k0 : thr;
    if (n < W) {  // the tail: pad with a harmless class (z = 0) and drop its outputs
      std::fill(tail_loc, tail_loc + W, T(0));
      std::fill(tail_scale, tail_scale + W, T(1));
      std::fill(tail_thr, tail_thr + W, T(0));
      std::copy(lp, lp + n, tail_loc);
      std::copy(sp, sp + n, tail_scale);
      if constexpr (PerClass) std::copy(tp, tp + n, tail_thr);
      lp = tail_loc;
      sp = tail_scale;
      if constexpr (PerClass) tp = tail_thr;
    }
    const B l = B::load_unaligned(lp), s = B::load_unaligned(sp);
    const B th = PerClass ? B::load_unaligned(tp) : B(thr[0]);
    const B z = (l - th) / s;
    B loss, g, gz, theta;
    ovr_negative_batch<B, T>(z, loss, g, gz, theta);
    if (stats) {  // P and the running argmax, over the real lanes (the label's included)
      const auto real = lanes < B(static_cast<T>(n));
      const B small = theta / B(raw::pi<T>);
      prob_acc += xsimd::select(real, xsimd::select(z > B(T(0)), B(T(1)) - small, small), B(T(0)));
      const auto better = real & (z > best_z);
      best_z = xsimd::select(better, z, best_z);
      best_k = xsimd::select(better, lanes + B(static_cast<T>(k0)), best_k);
    }
    if (n < W || (skip >= k0 && skip < k0 + W)) {  // drop padded lanes and the skipped class
      alignas(64) T mask[W];
      for (std::size_t i = 0; i < W; ++i) mask[i] = (i < n && k0 + i != skip) ? T(1) : T(0);
      const auto keep = B::load_aligned(mask) != B(T(0));  // select, not multiply: ∞·0 is NaN
      loss = xsimd::select(keep, loss, B(T(0)));
      g = xsimd::select(keep, g, B(T(0)));
      gz = xsimd::select(keep, gz, B(T(0)));
    }
    loss_acc += loss;
    const B inv_s = B(T(1)) / s;
    const B d_loc = w * g * inv_s;
    const B d_scale = -(w * gz * inv_s);
    T* dl = out.d_loc ? (n < W ? tail_dloc : out.d_loc + k0) : nullptr;
    T* ds = out.d_scale ? (n < W ? tail_dscale : out.d_scale + k0) : nullptr;
    if (dl) d_loc.store_unaligned(dl);
    if (ds) d_scale.store_unaligned(ds);
    if (n < W) {
      if (out.d_loc) std::copy(tail_dloc, tail_dloc + n, out.d_loc + k0);
      if (out.d_scale) std::copy(tail_dscale, tail_dscale + n, out.d_scale + k0);
    }
    if (out.d_threshold) {
      if constexpr (PerClass) {
        T* dt = out.d_threshold + k0;
        alignas(64) T d_thr[W];
        (-d_loc).store_aligned(d_thr);
        for (std::size_t i = 0; i < n; ++i) dt[i] += d_thr[i];
      } else {
        dthr_acc -= d_loc;
      }
    }
  }
  if (stats) {
    alignas(64) T zs[W], ks[W];
    best_z.store_aligned(zs);
    best_k.store_aligned(ks);
    for (std::size_t i = 0; i < W; ++i) {  // lanes hold the first best of their classes
      const auto k = static_cast<std::int64_t>(ks[i]);
      if (k < 0) continue;
      if (zs[i] > stats->best_margin || (zs[i] == stats->best_margin && k < stats->best_index)) {
        stats->best_margin = zs[i];
        stats->best_index = k;
      }
    }
  }
#if XSIMD_VERSION_MAJOR >= 9
  if (stats) stats->prob_sum += xsimd::reduce_add(prob_acc);
  if constexpr (!PerClass)
    if (out.d_threshold) out.d_threshold[0] += xsimd::reduce_add(dthr_acc);
  return xsimd::reduce_add(loss_acc);
#else
  if (stats) stats->prob_sum += xsimd::hadd(prob_acc);
  if constexpr (!PerClass)
    if (out.d_threshold) out.d_threshold[0] += xsimd::hadd(dthr_acc);
  return xsimd::hadd(loss_acc);
#endif
}

template <Real T, bool PerClass>
inline T ovr_bce_row_scalar(const T* loc, const T* scale, const T* thr, std::size_t K,
                            std::size_t skip, T weight, OvrRowGrads<T> out,
                            OvrRowStats<T>* stats) noexcept {
  T loss = T(0);
  for (std::size_t k = 0; k < K; ++k) {
    const T c = PerClass ? thr[k] : thr[0];
    if (stats) stats->add(k, raw::ovr_margin(loc[k], scale[k], c), raw::ovr_prob(loc[k], scale[k], c));
    if (k == skip) continue;
    const auto g = raw::ovr_bce_grad(T(0), loc[k], scale[k], c);
    loss += g.value;
    if (out.d_loc) out.d_loc[k] = weight * g.d_loc;
    if (out.d_scale) out.d_scale[k] = weight * g.d_scale;
    if (out.d_threshold) out.d_threshold[PerClass ? k : 0] += weight * g.d_threshold;
  }
  return loss;
}

}  // namespace detail

/// Σ_k BCE(1[k = label], P_k) over one row of K classes, P_k = ½ + atan((loc_k − C_k)/scale_k)/π,
/// with the stable log P / log(1 − P) forms. Writes weight·∂/∂loc_k and weight·∂/∂scale_k into
/// `grads` and accumulates weight·∂/∂C into grads.d_threshold; returns the (unweighted) loss.
/// `label` outside [0, K) means "no positive class" (every class a negative). With `stats`,
/// also Σ_k P_k and argmax_k P_k of the row, in the same pass.
/// Accuracy: within a few ulp of the scalar raw::ovr_bce_grad per class (tested).
template <Real T>
inline T ovr_bce_row(std::span<const T> loc, std::span<const T> scale,
                     RowThresholds<T> thresholds, std::int64_t label, T weight = T(1),
                     OvrRowGrads<T> grads = {}, OvrRowStats<T>* stats = nullptr) noexcept {
  const std::size_t K = loc.size();
  // The positive class is left out of the vectorised pass (its lane contributes 0) and
  // evaluated alone, so no term is ever added and then subtracted again.
  const bool has_label = label >= 0 && static_cast<std::size_t>(label) < K;
  const std::size_t skip = has_label ? static_cast<std::size_t>(label) : K;
  T loss;
  if constexpr (detail::simd_row_v<T>) {
    loss = thresholds.per_class
               ? detail::ovr_bce_row_simd<T, true>(loc.data(), scale.data(), thresholds.values, K,
                                                   skip, weight, grads, stats)
               : detail::ovr_bce_row_simd<T, false>(loc.data(), scale.data(), thresholds.values,
                                                    K, skip, weight, grads, stats);
  } else {
    loss = thresholds.per_class
               ? detail::ovr_bce_row_scalar<T, true>(loc.data(), scale.data(), thresholds.values,
                                                     K, skip, weight, grads, stats)
               : detail::ovr_bce_row_scalar<T, false>(loc.data(), scale.data(),
                                                      thresholds.values, K, skip, weight, grads, stats);
  }
  if (has_label) {
    const auto pos = raw::ovr_bce_grad(T(1), loc[skip], scale[skip], thresholds.at(skip));
    loss += pos.value;
    if (grads.d_loc) grads.d_loc[skip] = weight * pos.d_loc;
    if (grads.d_scale) grads.d_scale[skip] = weight * pos.d_scale;
    if (grads.d_threshold) grads.d_threshold[thresholds.per_class ? skip : 0] += weight * pos.d_threshold;
  }
  return loss;
}

/// P_k = P(S_k > C_k) for a row of K classes, written into `prob` ([K]), vectorised.
template <Real T>
inline void ovr_prob_row(std::span<const T> loc, std::span<const T> scale,
                         RowThresholds<T> thresholds, std::span<T> prob) noexcept {
  const std::size_t K = loc.size();
  std::size_t k = 0;
  if constexpr (detail::simd_row_v<T>) {
    using B = xsimd::batch<T>;
    constexpr std::size_t W = B::size;
    const B one(T(1)), inv_pi(T(1) / raw::pi<T>);
    for (; k + W <= K; k += W) {
      const B th = thresholds.per_class ? B::load_unaligned(thresholds.values + k)
                                        : B(thresholds.values[0]);
      const B z = (B::load_unaligned(loc.data() + k) - th) / B::load_unaligned(scale.data() + k);
      const B small = xsimd::atan2(one, xsimd::abs(z)) * inv_pi;  // the smaller of P, 1 − P
      xsimd::select(z < B(T(0)), small, one - small).store_unaligned(prob.data() + k);
    }
  }
  for (; k < K; ++k) prob[k] = raw::ovr_prob(loc[k], scale[k], thresholds.at(k));
}

}  // namespace causalqwen
