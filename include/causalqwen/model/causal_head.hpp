/// The causal heads on the backbone's output z [M,H] (M = B·S positions, flattened), as a
/// composition of the layers, in three stages: `forward` (evaluation: the values and metrics),
/// `loss_and_gradient` (the same with ∂L/∂A, fused with the losses) and `backward` (down to ∂L/∂z):
///
///   U = Abduction(z)            independent Cauchy [M,C]      (abduction.hpp)
///   A = Action.noise(U)         independent Cauchy [M,C]      (action.hpp)
///   Y, P_<NUM>, gate·nll        Y marginal [M]                (losses.hpp, RegressionLoss)
///   S chunk by chunk, OvR BCE   S marginal [M,K], never whole (losses.hpp, OvrLoss)
///   L_total = L_cls_mean + λ·L_reg_eff
///
/// backward runs the mirror: ∂L/∂A from both losses → Action.noise_backward → Abduction.backward.
#pragma once
#include "causalqwen/model/abduction.hpp"
#include "causalqwen/model/action.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/losses.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace causalqwen::model {

/// The heads' parameters (or, with the same layout, their gradients).
template <class V>
struct HeadParams {
  using T = std::remove_const_t<V>;
  typename Abduction<T>::template ParamsOf<V> abduction;
  typename Action<T>::template ParamsOf<V> action;
  template <class A>
  static HeadParams bind(A& arena) {
    return {Abduction<T>::template ParamsOf<V>::bind(arena), Action<T>::template ParamsOf<V>::bind(arena)};
  }
};

/// Adds the heads' slots (abduction, then action) to a layout.
inline void add_head_params(Layout& layout, const CausalConfig& cfg) {
  Abduction<float>::add_params(layout, cfg.causal_size, cfg.hidden_size());
  Action<float>::add_params(layout, cfg.causal_size, cfg.num_classes);
}

/// Initialises every head parameter except cls.weight (which the caller copies from the base
/// lm_head, or draws with init_cls_random): W_loc = I, b_loc = 0, W_scale = 0,
/// b_scale = softplus⁻¹(γ_init), and the action's inits. Deterministic for a given seed.
template <class T>
void init_heads(Arena<T>& params, const CausalConfig& cfg, std::uint64_t seed) {
  const auto p = HeadParams<T>::bind(params);
  Abduction<T>::init(p.abduction, cfg.gamma_init);
  Action<T>::init(p.action, cfg, seed);
  params.touch();
}

/// cls.weight ~ N(0, std²), for models trained from scratch (no base lm_head to copy).
template <class T>
void init_cls_random(Arena<T>& params, std::uint64_t seed, double std = 0.02) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::normal_distribution<double> normal(0.0, std);
  for (auto& w : params.slot_span(names::cls_w)) w = static_cast<T>(normal(rng));
  params.touch();
}

/// The scalars a forward pass reports (a mean over an empty set is 0).
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
  /// Everything the forward pass leaves for backward and for reports.
  struct Cache {
    std::size_t rows = 0;
    typename Abduction<T>::Cache abduction;        // loc_U, pre_scale, scale_U [M,C]
    typename Action<T>::Cache action;              // loc_A, scale_A (epsilon) [M,C]
    typename RegressionLoss<T>::Rows regression;   // loc_Y, scale_Y, nll, P_num, gate, L_reg_gated [M]
    typename OvrLoss<T>::Rows ovr;                 // L_cls, prob_sum, pred, max_prob [M]
    std::vector<std::uint8_t> valid, num, token;   // [M] has a label, the label is <NUM>, is a token
    std::vector<T> d_loc_A, d_scale_A;             // [M,C] ∂L/∂A from loss_and_gradient, ∂L/∂U in backward
    bool has_loss_gradient = false;                // d_loc_A, d_scale_A hold ∂L/∂A for backward
    HeadMetrics metrics;
  };

  explicit CausalHead(CausalConfig config, std::size_t class_chunk = 2048)
      : cfg_(std::move(config)), ovr_(class_chunk) {
    cfg_.validate("CausalHead");
  }
  const CausalConfig& config() const { return cfg_; }
  /// Changes α of the gate m·(α + (1 − α)·P_<NUM>) for the next runs (an α schedule);
  /// DomainError unless α ∈ [0, 1].
  void set_alpha_gate(double alpha) {
    detail::require(alpha >= 0 && alpha <= 1, "CausalHead::set_alpha_gate", "alpha must lie in [0, 1], got {}", alpha);
    cfg_.alpha_gate = alpha;
  }

  /// Changes λ, the weight of the regression loss in L_total = L_cls_mean + λ·L_reg_eff.
  void set_reg_loss_weight(double lambda) {
    detail::require(lambda >= 0 && std::isfinite(lambda), "CausalHead::set_reg_loss_weight",
                    "lambda must be finite and >= 0, got {}", lambda);
    cfg_.reg_loss_weight = lambda;
  }

  /// Forward over z [M,H] (evaluation): U, A, Y, P_<NUM>, the losses' values and the metrics,
  /// no gradients. Beyond linalg::fused_rows_max scored rows the class products read |W_cls| from
  /// p.action.cls_weight.abs (a model's store keeps it: CausalQwen::evaluation_head_params).
  /// Returns the metrics (also in c.metrics).
  HeadMetrics forward(const HeadParams<const T>& p, TensorView<const T, 2> z, const HeadTargets<T>& targets,
                      ActionMode mode, SamplingNoise<T> noise, Cache& c) {
    const auto A = actions(p, z, targets, mode, noise, c);  // independent [M,C]
    RegressionLoss<T>::forward(p.action, A, c.num, targets.target_values, cfg_, c.regression);
    ovr_.forward(p.action, A, rows_, c.valid, n_valid_, targets.labels, cfg_, c.ovr);
    finish_metrics(targets, c);
    c.has_loss_gradient = false;
    return c.metrics;
  }

  /// The forward's values and metrics with the losses' gradients, fused (the OvR loss takes each
  /// chunk of classes back through W_cls before scoring the next): c.dA [M,C] = ∂L_total/∂A, and
  /// grads += ∂L_total/∂θ for the losses' parameters (w_reg, b_reg, W_cls, b_cls, thresholds;
  /// weight products offered to `sink` first). Returns the metrics (also in c.metrics).
  HeadMetrics loss_and_gradient(const HeadParams<const T>& p, TensorView<const T, 2> z, const HeadTargets<T>& targets,
                                ActionMode mode, SamplingNoise<T> noise, Cache& c, const HeadParams<T>& grads,
                                linalg::WeightGradSink<T>* sink = nullptr) {
    const std::size_t M = z.shape[0], C = cfg_.causal_size;
    const auto A = actions(p, z, targets, mode, noise, c);  // independent [M,C]
    c.d_loc_A.assign(M * C, T(0));
    c.d_scale_A.assign(M * C, T(0));
    const CauchyViewGrad<T, 2> dA{{c.d_loc_A.data(), {M, C}}, {c.d_scale_A.data(), {M, C}}};  // [M,C]
    RegressionLoss<T>::loss_and_gradient(p.action, A, c.num, targets.target_values, cfg_, c.regression, grads.action, dA);
    ovr_.loss_and_gradient(p.action, A, rows_, c.valid, n_valid_, targets.labels, cfg_, c.ovr, grads.action, dA, sink);
    finish_metrics(targets, c);
    c.has_loss_gradient = true;
    return c.metrics;
  }

  /// The heads' backward from the ∂L/∂A that loss_and_gradient left in c (once per call of it):
  /// Action.noise_backward (∂L/∂U), then Abduction.backward: grads += ∂L/∂θ for the noise and
  /// the abduction's parameters, dz [M,H] += ∂L_total/∂z (weight products offered to `sink` first).
  void backward(const HeadParams<const T>& p, const HeadParams<T>& grads, TensorView<const T, 2> z, Cache& c,
                TensorView<T, 2> dz, linalg::WeightGradSink<T>* sink = nullptr) {
    const std::size_t M = c.rows, C = cfg_.causal_size;
    detail::require(c.has_loss_gradient, "CausalHead::backward",
                    "the cache holds no dL/dA: call loss_and_gradient before each backward");
    require_shape(z, {M, cfg_.hidden_size()}, "CausalHead::backward", "z");
    require_shape(dz, {M, cfg_.hidden_size()}, "CausalHead::backward", "dz");
    c.has_loss_gradient = false;  // noise_backward turns dA into dU in place
    const CauchyViewGrad<T, 2> dA{{c.d_loc_A.data(), {M, C}}, {c.d_scale_A.data(), {M, C}}};  // [M,C]
    Action<T>::noise_backward(p.action, grads.action, c.action, dA);  // dA is now dU
    Abduction<T>::backward(p.abduction, grads.abduction, z, c.abduction, dA, dz, sink);
  }

  /// The [M,K] tensors of the report path (small models only): loc_S, scale_S, the margins
  /// ovr_z = (loc_S − C)/scale_S, P, log P, log(1 − P), from a cache filled by forward or
  /// loss_and_gradient; beyond linalg::fused_rows_max positions |W_cls| is read from
  /// p.action.cls_weight.abs (CausalQwen::evaluation_head_params).
  struct FullVocabulary {
    std::vector<T> loc_S, scale_S, ovr_z, P, log_P, log_1mP;
  };
  FullVocabulary full_vocabulary(const HeadParams<const T>& p, const Cache& c) const {
    const std::size_t M = c.rows, C = cfg_.causal_size, K = cfg_.num_classes;
    FullVocabulary out;
    for (auto* v : {&out.loc_S, &out.scale_S, &out.ovr_z, &out.P, &out.log_P, &out.log_1mP}) v->resize(M * K);
    const Individuals<const T> A = Action<T>::output(c.action, Abduction<T>::individuals(c.abduction, C));
    Action<T>::classes(p.action, A, 0, K, p.action.cls_weight.abs,
                       {TensorView<T, 2>(out.loc_S.data(), {M, K}), TensorView<T, 2>(out.scale_S.data(), {M, K})});
    for (std::size_t i = 0; i < M * K; ++i) {
      const T l = out.loc_S[i], s = out.scale_S[i], thr = p.action.threshold[i % K];
      out.ovr_z[i] = raw::ovr_margin(l, s, thr);
      out.P[i] = raw::ovr_prob(l, s, thr);
      out.log_P[i] = raw::ovr_log_prob(l, s, thr);
      out.log_1mP[i] = raw::ovr_log_1m_prob(l, s, thr);
    }
    return out;
  }

 private:
  /// The inputs checked, the rows marked, U = Abduction(z) and A = Action.noise(U) into c.
  Individuals<const T> actions(const HeadParams<const T>& p, TensorView<const T, 2> z, const HeadTargets<T>& targets,
                               ActionMode mode, const SamplingNoise<T>& noise, Cache& c) {
    check_inputs(p, z, targets, mode, noise);
    mark_rows(c, z.shape[0], targets);
    const auto U = Abduction<T>::forward(p.abduction, z, c.abduction, static_cast<T>(cfg_.scale_U_floor));  // independent [M,C]
    return Action<T>::noise(p.action, U, mode, noise, c.action);                                            // independent [M,C]
  }

  void check_inputs(const HeadParams<const T>& p, TensorView<const T, 2> z, const HeadTargets<T>& t, ActionMode mode,
                    const SamplingNoise<T>& noise) const {
    const std::size_t M = z.shape[0], C = cfg_.causal_size, H = cfg_.hidden_size(), K = cfg_.num_classes;
    require_shape(z, {M, H}, "CausalHead", "z");
    require_shape(p.action.cls_weight.values, {K, C}, "CausalHead", "causal.action.cls.weight");
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
  }

  /// Which positions have a label, a <NUM> label, are tokens; the rows the OvR loss evaluates.
  void mark_rows(Cache& c, std::size_t M, const HeadTargets<T>& t) {
    c.rows = M;
    c.valid.assign(M, 0);
    c.num.assign(M, 0);
    c.token.assign(M, 1);
    rows_.clear();
    n_valid_ = 0;
    for (std::size_t m = 0; m < M; ++m) {
      c.valid[m] = t.labels[m] != ignore_index;
      c.num[m] = t.labels[m] == cfg_.num_token_id;
      if (!t.attention_mask.empty()) c.token[m] = t.attention_mask[m] != 0;
      if (c.valid[m] || c.token[m]) rows_.push_back(m);
      n_valid_ += c.valid[m];
    }
  }

  /// Σ_j x_j of one row in double, in eight interleaved partial sums (a single chain of
  /// additions would wait on each one's latency).
  static double row_sum(const T* x, std::size_t n) {
    double part[8] = {};
    std::size_t j = 0;
    for (; j + 8 <= n; j += 8)
      for (std::size_t l = 0; l < 8; ++l) part[l] += static_cast<double>(x[j + l]);
    for (; j < n; ++j) part[0] += static_cast<double>(x[j]);
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
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
        cls_sum += c.ovr.L_cls[m];
        prob += c.ovr.prob_sum[m];
        correct += c.ovr.pred[m] == t.labels[m];
      }
      if (c.num[m]) {
        ++h.num_count;
        reg_sum += c.regression.L_reg_gated[m];
        const double y = t.target_values.empty() ? 0.0 : static_cast<double>(t.target_values[m]);
        mae += std::fabs(static_cast<double>(c.regression.loc_Y[m]) - y);
        num_correct += c.ovr.pred[m] == cfg_.num_token_id;
        p_num += c.regression.P_num[m];
      }
      if (c.token[m]) {
        ++tokens;
        u_loc += row_sum(&c.abduction.loc_U[m * C], C);
        u_scale += row_sum(&c.abduction.scale_U[m * C], C);
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

  CausalConfig cfg_;
  OvrLoss<T> ovr_;
  std::vector<std::size_t> rows_;
  std::size_t n_valid_ = 0;
};

}  // namespace causalqwen::model
