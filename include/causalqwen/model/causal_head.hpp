/// The causal heads and the loss, forward and backward, on the backbone's output z [M,H]
/// (M = B·S positions, flattened):
///
///   Abduction   loc_U = z·W_locᵀ + b_loc,  scale_U = softplus(z·W_scaleᵀ + b_scale)   [M,C]
///   Action      deterministic: loc_A = loc_U,                scale_A = scale_U + |b_noise|
///               sampling:      loc_A = loc_U + T·|b_noise|·ε, scale_A = scale_U,  ε = tan(π(u − ½))
///               loc_S = loc_A·W_clsᵀ + b_cls,  scale_S = scale_A·|W_cls|ᵀ                [M,K]
///               loc_Y = loc_A·w_regᵀ + b_reg,  scale_Y = scale_A·|w_reg|ᵀ                [M]
///   OvR         P = ½ + atan((loc_S − C_k)/scale_S)/π
///   Loss        L_cls = Σ_k BCE(onehot(label), P_k);  L_cls_mean = Σ_valid L_cls / max(N_valid, 1)
///               nll = log(π·scale_Y) + log1p(((y − loc_Y)/scale_Y)²)
///               gate = m·(α + (1 − α)·P_<NUM>)  (not detached);  L_reg_eff = Σ gate·nll / max(N_num, 1)
///               L_total = L_cls_mean + λ·L_reg_eff
///
/// The training path never holds [M,K]: the vocabulary is walked in chunks of classes, each
/// chunk fusing the two GEMMs, the vectorised OvR BCE kernel (with Σ_k P and argmax_k P for the
/// metrics) and the backward GEMMs. |W_cls| is computed chunk by chunk on the training path
/// (its [K,C] copy would be rebuilt after every update anyway: 545 MB on a Qwen2.5-0.5B head)
/// and cached per parameter version when only evaluating (generation reuses it token after token).
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/cauchy/ovr_row.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/abs_weight.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/head_params.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace causalqwen::model {

/// Which noise the action network sees (seed 004): on the scale (deterministic, training) or
/// on the location with a temperature (sampling).
enum class ActionMode { deterministic, sampling };

/// Label value of positions without a target.
inline constexpr std::int64_t ignore_index = -100;

/// Targets and masks of a batch, flattened over positions m = b·S + s (all [M]).
template <class T>
struct HeadTargets {
  TensorView<const std::int64_t, 1> labels;          // −100 = no target
  TensorView<const T, 1> target_values;              // empty = 0 everywhere
  TensorView<const std::int64_t, 1> attention_mask;  // empty = every position is a token
};

/// The sampling mode's noise: uniforms u ∈ (0,1) [M,C] and the temperature T ≥ 0.
template <class T>
struct SamplingNoise {
  T temperature = T(0);
  TensorView<const T, 2> uniform;
};

/// The scalars of seed 001 §4 (a mean over an empty set is 0).
struct HeadMetrics {
  double L_cls_mean = 0, L_reg_eff = 0, L_total = 0;
  double reg_mae = 0;                // mean |loc_Y − y| over <NUM> targets
  double units_mean_loc = 0;         // mean loc_U over tokens (attention_mask = 1) and C
  double units_mean_scale = 0;       // mean scale_U over the same
  double ovr_prob_sum = 0;           // mean over valid positions of Σ_k P_k
  double accuracy = 0;               // argmax_k P_k = label, over valid positions
  double num_accuracy = 0;           // argmax_k P_k = <NUM>, over <NUM> targets
  double mean_P_num = 0;             // mean P_<NUM> over <NUM> targets
  std::size_t valid_count = 0, num_count = 0;
};

template <class T>
class CausalHead {
 public:
  /// Everything the forward pass leaves for backward and for reports; per-row vectors are [M].
  struct Cache {
    std::size_t rows = 0;
    ActionMode mode = ActionMode::deterministic;
    T temperature = T(0);
    std::vector<T> loc_U, pre_scale, scale_U, epsilon, loc_A, scale_A;  // [M,C]
    std::vector<T> loc_Y, scale_Y, nll, P_num, gate, L_cls, L_reg_gated, prob_sum;
    std::vector<std::int64_t> pred;          // argmax_k P_k; −1 where not evaluated
    std::vector<std::uint8_t> valid, num, token;
    HeadMetrics metrics;
  };

  explicit CausalHead(CausalConfig config, std::size_t class_chunk = 2048)
      : cfg_(std::move(config)), chunk_(class_chunk) {
    cfg_.validate("CausalHead");
    detail::require(chunk_ > 0, "CausalHead", "class_chunk must be > 0");
  }
  const CausalConfig& config() const { return cfg_; }
  /// Changes α of the gate m·(α + (1 − α)·P_<NUM>) for the next runs (an α schedule);
  /// DomainError unless α ∈ [0, 1].
  void set_alpha_gate(double alpha) {
    detail::require(alpha >= 0 && alpha <= 1, "CausalHead::set_alpha_gate", "alpha must lie in [0, 1], got {}", alpha);
    cfg_.alpha_gate = alpha;
  }

  /// Forward over z [M,H]; with `grads` also backward: grads += ∂L_total/∂θ for the head's
  /// parameters and dz [M,H] += ∂L_total/∂z. Returns the metrics (also in cache.metrics).
  HeadMetrics run(const HeadParams<const T>& p, std::uint64_t params_version,
                  TensorView<const T, 2> z, const HeadTargets<T>& targets, ActionMode mode,
                  SamplingNoise<T> noise, Cache& cache, const HeadParams<T>* grads = nullptr,
                  TensorView<T, 2> dz = {}) {
    const std::size_t M = z.shape[0], C = cfg_.causal_size;
    check_inputs(p, z, targets, mode, noise, grads, dz);
    prepare(cache, M, C, mode, noise.temperature, targets);
    abduction_forward(p, z, cache);
    action_forward(p, noise, cache);
    std::vector<T> d_loc_A, d_scale_A;
    if (grads) {
      d_loc_A.assign(M * C, T(0));
      d_scale_A.assign(M * C, T(0));
    }
    regression_and_gate(p, targets, cache, grads, d_loc_A, d_scale_A);
    vocabulary(p, params_version, targets, cache, grads, d_loc_A, d_scale_A);
    finish_metrics(targets, cache);
    if (grads) {
      action_backward(p, cache, *grads, d_loc_A, d_scale_A);
      abduction_backward(p, z, cache, *grads, d_loc_A, d_scale_A, dz);
    }
    return cache.metrics;
  }

  /// The [M,K] tensors of the report path (small models only): loc_S, scale_S, the margins
  /// ovr_z = (loc_S − C)/scale_S, P, log P, log(1 − P), from a cache filled by run().
  struct FullVocabulary {
    std::vector<T> loc_S, scale_S, ovr_z, P, log_P, log_1mP;
  };
  FullVocabulary full_vocabulary(const HeadParams<const T>& p, const Cache& cache) const {
    const std::size_t M = cache.rows, C = cfg_.causal_size, K = cfg_.num_classes;
    FullVocabulary out;
    out.loc_S.resize(M * K);
    out.scale_S.resize(M * K);
    std::vector<T> abs_w(p.cls_weight.begin(), p.cls_weight.end());
    for (auto& w : abs_w) w = std::fabs(w);
    linalg::linear_forward<T>({out.loc_S.data(), {M, K}}, {cache.loc_A.data(), {M, C}}, p.cls_weight, p.cls_bias);
    linalg::abs_linear_forward<T>({out.scale_S.data(), {M, K}}, {cache.scale_A.data(), {M, C}}, {abs_w.data(), {K, C}});
    out.ovr_z.resize(M * K);
    out.P.resize(M * K);
    out.log_P.resize(M * K);
    out.log_1mP.resize(M * K);
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t k = 0; k < K; ++k) {
        const std::size_t i = m * K + k;
        const T c = p.threshold[k];
        out.ovr_z[i] = raw::ovr_margin(out.loc_S[i], out.scale_S[i], c);
        out.P[i] = raw::ovr_prob(out.loc_S[i], out.scale_S[i], c);
        out.log_P[i] = raw::ovr_log_prob(out.loc_S[i], out.scale_S[i], c);
        out.log_1mP[i] = raw::ovr_log_1m_prob(out.loc_S[i], out.scale_S[i], c);
      }
    return out;
  }

 private:
  void check_inputs(const HeadParams<const T>& p, TensorView<const T, 2> z, const HeadTargets<T>& t,
                    ActionMode mode, const SamplingNoise<T>& noise, const HeadParams<T>* grads,
                    TensorView<T, 2> dz) const {
    const std::size_t M = z.shape[0], C = cfg_.causal_size, H = cfg_.hidden_size(), K = cfg_.num_classes;
    require_shape(z, {M, H}, "CausalHead", "z");
    require_shape(p.cls_weight, {K, C}, "CausalHead", "causal.action.cls.weight");
    require_shape(t.labels, {M}, "CausalHead", "labels");
    if (!t.target_values.empty()) require_shape(t.target_values, {M}, "CausalHead", "target_values");
    if (!t.attention_mask.empty()) require_shape(t.attention_mask, {M}, "CausalHead", "attention_mask");
    for (std::size_t m = 0; m < M; ++m) {
      const auto y = t.labels[m];
      detail::require(y == ignore_index || (y >= 0 && static_cast<std::size_t>(y) < K), "CausalHead",
                      "label {} at position {} is neither -100 nor a class id in [0, {})", y, m, K);
    }
    if (mode == ActionMode::sampling) {
      detail::require(noise.temperature >= T(0), "CausalHead", "temperature must be >= 0, got {}", noise.temperature);
      require_shape(noise.uniform, {M, C}, "CausalHead", "sampling uniforms");
      for (auto u : noise.uniform)
        detail::require(u > T(0) && u < T(1), "CausalHead", "sampling uniforms must lie in (0, 1), got {}", u);
    }
    if (grads) require_shape(dz, {M, H}, "CausalHead", "dz");
  }

  void prepare(Cache& c, std::size_t M, std::size_t C, ActionMode mode, T temperature,
               const HeadTargets<T>& t) const {
    c.rows = M;
    c.mode = mode;
    c.temperature = temperature;
    for (auto* v : {&c.loc_U, &c.pre_scale, &c.scale_U, &c.loc_A, &c.scale_A}) v->assign(M * C, T(0));
    c.epsilon.assign(mode == ActionMode::sampling ? M * C : 0, T(0));
    for (auto* v : {&c.loc_Y, &c.scale_Y, &c.nll, &c.P_num, &c.gate, &c.L_cls, &c.L_reg_gated, &c.prob_sum})
      v->assign(M, T(0));
    c.pred.assign(M, -1);
    c.valid.assign(M, 0);
    c.num.assign(M, 0);
    c.token.assign(M, 1);
    for (std::size_t m = 0; m < M; ++m) {
      c.valid[m] = t.labels[m] != ignore_index;
      c.num[m] = t.labels[m] == cfg_.num_token_id;
      if (!t.attention_mask.empty()) c.token[m] = t.attention_mask[m] != 0;
    }
  }

  /// loc_U = z·W_locᵀ + b_loc;  scale_U = softplus(z·W_scaleᵀ + b_scale).
  void abduction_forward(const HeadParams<const T>& p, TensorView<const T, 2> z, Cache& c) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    linalg::linear_forward<T>({c.loc_U.data(), {M, C}}, z, p.loc_weight, p.loc_bias);
    linalg::linear_forward<T>({c.pre_scale.data(), {M, C}}, z, p.scale_weight, p.scale_bias);
    parallel_for(M * C, M * C, [&](std::size_t i) { c.scale_U[i] = raw::softplus(c.pre_scale[i]); });
  }

  /// loc_A, scale_A from loc_U, scale_U and b_noise (see the file comment).
  void action_forward(const HeadParams<const T>& p, const SamplingNoise<T>& noise, Cache& c) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    parallel_for(M, M * C, [&](std::size_t m) {
      for (std::size_t j = 0; j < C; ++j) {
        const std::size_t i = m * C + j;
        const T b = std::fabs(p.b_noise[j]);
        if (c.mode == ActionMode::deterministic) {
          c.loc_A[i] = c.loc_U[i];
          c.scale_A[i] = c.scale_U[i] + b;
        } else {
          c.epsilon[i] = raw::standard_quantile(noise.uniform[i]);
          c.loc_A[i] = c.loc_U[i] + c.temperature * b * c.epsilon[i];
          c.scale_A[i] = c.scale_U[i];
        }
      }
    });
  }

  /// Regression head, P_<NUM>, the gate and their gradients (including the gate's path
  /// through P_<NUM> into class <NUM>'s loc_S and scale_S).
  void regression_and_gate(const HeadParams<const T>& p, const HeadTargets<T>& t, Cache& c,
                           const HeadParams<T>* g, std::vector<T>& d_loc_A, std::vector<T>& d_scale_A) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    const auto num = static_cast<std::size_t>(cfg_.num_token_id);
    const T* w = p.reg_weight.data;
    const T* w_num = p.cls_weight.data + num * C;
    std::size_t n_num = 0;
    for (auto v : c.num) n_num += v;
    const T lambda = static_cast<T>(cfg_.reg_loss_weight), alpha = static_cast<T>(cfg_.alpha_gate);
    const T per_num = lambda / static_cast<T>(std::max<std::size_t>(n_num, 1));
    for (std::size_t m = 0; m < M; ++m) {
      const T* la = &c.loc_A[m * C];
      const T* sa = &c.scale_A[m * C];
      T loc_y = p.reg_bias[0], scale_y = 0, loc_s = p.cls_bias[num], scale_s = 0;
      for (std::size_t j = 0; j < C; ++j) {
        loc_y += la[j] * w[j];
        scale_y += sa[j] * std::fabs(w[j]);
        loc_s += la[j] * w_num[j];
        scale_s += sa[j] * std::fabs(w_num[j]);
      }
      const T y = t.target_values.empty() ? T(0) : t.target_values[m];
      const auto nll = raw::nll_grad(y, loc_y, scale_y);
      const auto P = raw::ovr_prob_grad(loc_s, scale_s, p.threshold[num]);
      c.loc_Y[m] = loc_y;
      c.scale_Y[m] = scale_y;
      c.nll[m] = nll.value;
      c.P_num[m] = P.value;
      c.gate[m] = c.num[m] ? alpha + (T(1) - alpha) * P.value : T(0);
      c.L_reg_gated[m] = c.num[m] ? c.gate[m] * nll.value : T(0);
      if (!g || !c.num[m]) continue;
      const T d_loc_y = per_num * c.gate[m] * nll.d_loc, d_scale_y = per_num * c.gate[m] * nll.d_scale;
      const T d_P = per_num * (T(1) - alpha) * nll.value;  // ∂L/∂P_<NUM>
      const T d_loc_s = d_P * P.d_loc, d_scale_s = d_P * P.d_scale;
      T* dla = &d_loc_A[m * C];
      T* dsa = &d_scale_A[m * C];
      T* dw = g->reg_weight.data;
      T* dw_num = g->cls_weight.data + num * C;
      for (std::size_t j = 0; j < C; ++j) {
        dla[j] += d_loc_y * w[j] + d_loc_s * w_num[j];
        dsa[j] += d_scale_y * std::fabs(w[j]) + d_scale_s * std::fabs(w_num[j]);
        dw[j] += d_loc_y * la[j] + sign(w[j]) * d_scale_y * sa[j];
        dw_num[j] += d_loc_s * la[j] + sign(w_num[j]) * d_scale_s * sa[j];
      }
      g->reg_bias[0] += d_loc_y;
      g->cls_bias[num] += d_loc_s;
      g->threshold[num] += d_P * P.d_threshold;
    }
  }

  static T sign(T x) { return T((x > T(0)) - (x < T(0))); }

  /// The chunked vocabulary head: OvR BCE over all K classes for every evaluated row (tokens
  /// and rows with a label), its gradients, Σ_k P_k and argmax_k P_k.
  void vocabulary(const HeadParams<const T>& p, std::uint64_t version, const HeadTargets<T>& t,
                  Cache& c, const HeadParams<T>* g, std::vector<T>& d_loc_A, std::vector<T>& d_scale_A) {
    const std::size_t M = c.rows, C = cfg_.causal_size, K = cfg_.num_classes;
    std::vector<std::size_t> rows;
    std::size_t n_valid = 0;
    for (std::size_t m = 0; m < M; ++m) {
      if (c.valid[m] || c.token[m]) rows.push_back(m);
      n_valid += c.valid[m];
    }
    const std::size_t R = rows.size();
    if (R == 0) return;
    const T weight = T(1) / static_cast<T>(std::max<std::size_t>(n_valid, 1));
    // gather the evaluated rows: loc_A_r, scale_A_r [R,C]
    std::vector<T> loc_r(R * C), scale_r(R * C), d_loc_r, d_scale_r;
    for (std::size_t r = 0; r < R; ++r) {
      std::copy_n(&c.loc_A[rows[r] * C], C, &loc_r[r * C]);
      std::copy_n(&c.scale_A[rows[r] * C], C, &scale_r[r * C]);
    }
    if (g) {
      d_loc_r.assign(R * C, T(0));
      d_scale_r.assign(R * C, T(0));
    }
    // |W_cls| [K,C]: cached when evaluating; per chunk (abs_chunk_buf [Kc,C]) when training
    const T* abs_w = g ? nullptr : abs_cls_.get(p.cls_weight, version).data;
    std::vector<OvrRowStats<T>> stats(R);
    std::vector<T> loss_r(R, T(0));
    const std::size_t Kc = std::min(chunk_, K);
    std::vector<T> loc_s(R * Kc), scale_s(R * Kc), d_loc_s, d_scale_s, col(Kc), abs_chunk_buf(g ? Kc * C : 0);
    if (g) {
      d_loc_s.resize(R * Kc);
      d_scale_s.resize(R * Kc);
    }
    for (std::size_t k0 = 0; k0 < K; k0 += Kc) {
      const std::size_t n = std::min(Kc, K - k0);
      const TensorView<const T, 2> w_chunk(p.cls_weight.data + k0 * C, {n, C});
      if (g) parallel_for(n * C, n * C, [&](std::size_t i) { abs_chunk_buf[i] = std::fabs(w_chunk.data[i]); });
      const TensorView<const T, 2> abs_chunk(g ? abs_chunk_buf.data() : abs_w + k0 * C, {n, C});
      const TensorView<T, 2> loc_view(loc_s.data(), {R, n}), scale_view(scale_s.data(), {R, n});
      linalg::linear_forward<T>(loc_view, {loc_r.data(), {R, C}}, w_chunk, {p.cls_bias.data + k0, {n}});
      linalg::abs_linear_forward<T>(scale_view, {scale_r.data(), {R, C}}, abs_chunk);
      if (g) {
        std::fill_n(d_loc_s.begin(), R * n, T(0));
        std::fill_n(d_scale_s.begin(), R * n, T(0));
      }
      const T* thr = p.threshold.data + k0;
      parallel_for(R, R * n, [&](std::size_t r) {
        const std::size_t m = rows[r];
        const std::int64_t label_local = c.valid[m] ? t.labels[m] - static_cast<std::int64_t>(k0) : -1;
        const std::span<const T> loc_row(&loc_s[r * n], n), scale_row(&scale_s[r * n], n);
        OvrRowGrads<T> out;
        if (g && c.valid[m]) out = {&d_loc_s[r * n], &d_scale_s[r * n], nullptr};
        OvrRowStats<T> chunk_stats;
        T row_loss;
        if (cfg_.bce_form == BceForm::stable) {
          row_loss = ovr_bce_row<T>(loc_row, scale_row, RowThresholds<T>::per_class_span({thr, n}),
                                    label_local, weight, out, &chunk_stats);
        } else {
          row_loss = epsilon_row(loc_row, scale_row, thr, label_local, weight, out, chunk_stats);
        }
        if (c.valid[m]) loss_r[r] += row_loss;
        stats[r].prob_sum += chunk_stats.prob_sum;
        if (chunk_stats.best_index >= 0 && chunk_stats.best_margin > stats[r].best_margin) {
          stats[r].best_margin = chunk_stats.best_margin;
          stats[r].best_index = chunk_stats.best_index + static_cast<std::int64_t>(k0);
        } else if (stats[r].best_index < 0 && chunk_stats.best_index >= 0) {  // all margins NaN/−∞ so far
          stats[r].best_margin = chunk_stats.best_margin;
          stats[r].best_index = chunk_stats.best_index + static_cast<std::int64_t>(k0);
        }
      });
      if (!g) continue;
      const TensorView<const T, 2> dl(d_loc_s.data(), {R, n}), ds(d_scale_s.data(), {R, n});
      linalg::linear_backward_input<T>({d_loc_r.data(), {R, C}}, dl, w_chunk);
      linalg::abs_linear_backward_input<T>({d_scale_r.data(), {R, C}}, ds, abs_chunk);
      linalg::linear_backward_weight<T>({g->cls_weight.data + k0 * C, {n, C}}, dl, {loc_r.data(), {R, C}});
      linalg::abs_linear_backward_weight<T>({g->cls_weight.data + k0 * C, {n, C}}, ds, {scale_r.data(), {R, C}}, w_chunk);
      // ∂/∂b_cls = colsum(∂/∂loc_S); every term depends on (loc_S − C_k), so ∂/∂C_k = −colsum
      std::fill_n(col.begin(), n, T(0));
      linalg::bias_backward<T>({col.data(), {n}}, dl);
      for (std::size_t k = 0; k < n; ++k) {
        g->cls_bias[k0 + k] += col[k];
        g->threshold[k0 + k] -= col[k];
      }
    }
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t m = rows[r];
      c.L_cls[m] = loss_r[r];
      c.prob_sum[m] = stats[r].prob_sum;
      c.pred[m] = stats[r].best_index;
      if (g) {
        for (std::size_t j = 0; j < C; ++j) {
          d_loc_A[m * C + j] += d_loc_r[r * C + j];
          d_scale_A[m * C + j] += d_scale_r[r * C + j];
        }
      }
    }
  }

  /// Seed 000's ε-form over one row (scalar; kept for comparison, not for speed).
  T epsilon_row(std::span<const T> loc, std::span<const T> scale, const T* thr, std::int64_t label,
                T weight, OvrRowGrads<T> out, OvrRowStats<T>& stats) const {
    T loss = 0;
    const T eps = static_cast<T>(cfg_.bce_epsilon);
    for (std::size_t k = 0; k < loc.size(); ++k) {
      const T y = static_cast<std::int64_t>(k) == label ? T(1) : T(0);
      const auto b = raw::ovr_bce_eps_grad(y, loc[k], scale[k], thr[k], eps);
      loss += b.value;
      stats.add(k, raw::ovr_margin(loc[k], scale[k], thr[k]), raw::ovr_prob(loc[k], scale[k], thr[k]));
      if (out.d_loc) out.d_loc[k] = weight * b.d_loc;
      if (out.d_scale) out.d_scale[k] = weight * b.d_scale;
    }
    return loss;
  }

  void finish_metrics(const HeadTargets<T>& t, Cache& c) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    HeadMetrics& h = c.metrics;
    h = HeadMetrics{};
    double cls_sum = 0, reg_sum = 0, mae = 0, prob = 0, correct = 0, num_correct = 0, p_num = 0;
    double u_loc = 0, u_scale = 0;
    std::size_t tokens = 0;
    for (std::size_t m = 0; m < M; ++m) {
      if (c.valid[m]) {
        ++h.valid_count;
        cls_sum += c.L_cls[m];
        prob += c.prob_sum[m];
        correct += c.pred[m] == t.labels[m];
      }
      if (c.num[m]) {
        ++h.num_count;
        reg_sum += c.L_reg_gated[m];
        const double y = t.target_values.empty() ? 0.0 : static_cast<double>(t.target_values[m]);
        mae += std::fabs(static_cast<double>(c.loc_Y[m]) - y);
        num_correct += c.pred[m] == cfg_.num_token_id;
        p_num += c.P_num[m];
      }
      if (c.token[m]) {
        ++tokens;
        for (std::size_t j = 0; j < C; ++j) {
          u_loc += c.loc_U[m * C + j];
          u_scale += c.scale_U[m * C + j];
        }
      }
    }
    auto mean = [](double s, std::size_t n) { return n ? s / static_cast<double>(n) : 0.0; };
    h.L_cls_mean = cls_sum / static_cast<double>(std::max<std::size_t>(h.valid_count, 1));
    h.L_reg_eff = reg_sum / static_cast<double>(std::max<std::size_t>(h.num_count, 1));
    h.L_total = h.L_cls_mean + cfg_.reg_loss_weight * h.L_reg_eff;
    h.reg_mae = mean(mae, h.num_count);
    h.ovr_prob_sum = mean(prob, h.valid_count);
    h.accuracy = mean(correct, h.valid_count);
    h.num_accuracy = mean(num_correct, h.num_count);
    h.mean_P_num = mean(p_num, h.num_count);
    h.units_mean_loc = mean(u_loc, tokens * C);
    h.units_mean_scale = mean(u_scale, tokens * C);
  }

  /// d_loc_U = d_loc_A; d_scale_U = d_scale_A; and b_noise's gradient in either mode.
  void action_backward(const HeadParams<const T>& p, const Cache& c, const HeadParams<T>& g,
                       const std::vector<T>& d_loc_A, const std::vector<T>& d_scale_A) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    for (std::size_t j = 0; j < C; ++j) {
      const T s = sign(p.b_noise[j]);
      T acc = 0;
      for (std::size_t m = 0; m < M; ++m) {
        const std::size_t i = m * C + j;
        acc += c.mode == ActionMode::deterministic ? d_scale_A[i] : d_loc_A[i] * c.temperature * c.epsilon[i];
      }
      g.b_noise[j] += s * acc;
    }
  }

  /// Back through softplus and the two abduction projections into z.
  void abduction_backward(const HeadParams<const T>& p, TensorView<const T, 2> z, const Cache& c,
                          const HeadParams<T>& g, const std::vector<T>& d_loc_U,
                          const std::vector<T>& d_scale_U, TensorView<T, 2> dz) const {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    std::vector<T> d_pre(M * C);
    parallel_for(M * C, M * C, [&](std::size_t i) { d_pre[i] = d_scale_U[i] * raw::sigmoid(c.pre_scale[i]); });
    const TensorView<const T, 2> dl(d_loc_U.data(), {M, C}), dp(d_pre.data(), {M, C});
    linalg::linear_backward_input<T>(dz, dl, p.loc_weight);
    linalg::linear_backward_input<T>(dz, dp, p.scale_weight);
    linalg::linear_backward_weight<T>(g.loc_weight, dl, z);
    linalg::linear_backward_weight<T>(g.scale_weight, dp, z);
    linalg::bias_backward<T>(g.loc_bias, dl);
    linalg::bias_backward<T>(g.scale_bias, dp);
  }

  CausalConfig cfg_;
  std::size_t chunk_;
  linalg::AbsWeightCache<T> abs_cls_;
};

}  // namespace causalqwen::model
