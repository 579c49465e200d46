/// CausalQwen's two losses, each as `forward` (the values, for evaluation) and `loss_and_gradient`
/// (the same values with ∂L/∂A, fused chunk by chunk so that nothing of size [M,K] is kept):
///
///   OvR BCE     P_k = P(S_k > C_k) = ½ + atan((loc_S − C_k)/scale_S)/π   (stable atan2/log1p forms)
///               L_cls = Σ_k BCE(onehot(label), P_k);  L_cls_mean = Σ_valid L_cls / max(N_valid, 1)
///               walked over the vocabulary in chunks of classes: S of a chunk = the action's
///               linear map of A, the vectorised row kernel, then (loss_and_gradient) the
///               backward GEMMs.
///   regression  nll = log(π·scale_Y) + log1p(((y − loc_Y)/scale_Y)²)   (reg_head cauchy; the Gaussian
///               NLL or ½(y − loc_Y)² for reg_head gaussian or mse: model/regression_head.hpp)
///               gate = m·(α + (1 − α)·P_<NUM>)  (not detached);  L_reg_eff = Σ gate·nll / max(N_num, 1)
///               position by position for the Cauchy work, then the gate, gate·nll and the
///               backward's factors as expression passes over the M positions.
///
/// Both take the action's output A (independent); the class scores S and the
/// value Y are marginal Cauchy views, and the OvR probability and the NLL accept only Cauchy types.
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/cauchy/ovr.hpp"
#include "causalqwen/cauchy/ovr_row.hpp"
#include "causalqwen/text/labels.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/cauchy_linear.hpp"
#include "causalqwen/model/action.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/regression_head.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace causalqwen::model {

/// Targets and masks of a batch, flattened over positions m = b·S + s (all [M]).
template <class T>
struct HeadTargets {
  TensorView<const std::int64_t, 1> labels;          // −100 = no target
  TensorView<const T, 1> target_values;              // empty = 0 everywhere
  TensorView<const std::int64_t, 1> attention_mask;  // empty = every position is a token
};

/// P(S_k > C_k) for a Cauchy type's component (either kind: each component is exactly Cauchy).
template <class T>
T ovr_probability(CauchyParams<T> s, T threshold) {
  return raw::ovr_prob(s.loc, s.scale, threshold);
}

/// Y with its scale raised by config's floor: scale_Y = scale_Y_floor + |w_reg|·scale_A (∂scale_Y
/// is unchanged, so the gradients need nothing more).
template <class T>
CauchyParams<T> value_with_floor(CauchyParams<T> Y, const CausalConfig& cfg) {
  Y.scale += static_cast<T>(cfg.scale_Y_floor);
  return Y;
}

/// The gated regression loss and P_<NUM> over the M positions, its gradient alongside, in three
/// stages: the per-position Cauchy work (Y, the head's loss and its ∂/∂Y, P_<NUM> and its
/// derivatives: function calls, one position at a time) fills [M] arrays; the gate, the gated
/// loss and the backward's factors are elementwise chains over [M], one expression pass each
/// (autodiff::eval, float and double); the C-length accumulation into ∂L/∂A and the gradients
/// reads the factors. The chains take nll and P_<NUM> as 0 where m = 0 (copies made by the
/// first stage), so that a non-finite value there never reaches the gate's zeros.
template <class T>
struct RegressionLoss {
  /// The stages' [M] arrays: m (1 where the target is <NUM>), nll and P_<NUM> where m = 1 (0
  /// elsewhere) and, for the gradient, their derivatives there and the backward's factors.
  struct Work {
    std::vector<T> is_num, nll, P;
    std::vector<T> d_loc_nll, d_scale_nll, dP_d_loc, dP_d_scale, dP_d_threshold;
    std::vector<T> d_loc_Y, d_scale_Y, d_P, d_loc_S, d_scale_S, d_threshold;
  };
  struct Rows {
    std::vector<T> loc_Y, scale_Y, nll, P_num, gate, L_reg_gated;  // [M]
    Work work;  // the stages' [M] arrays
  };

  /// For every position m: Y, P_<NUM> and, where a <NUM> is the target (num[m]), the gate and
  /// gate·nll.
  static void forward(const typename Action<T>::Params& p, Individuals<const T> A, const std::vector<std::uint8_t>& num,
                      TensorView<const T, 1> targets, const CausalConfig& cfg, Rows& r) {
    cauchy_stage(p, A, num, targets, cfg, r, false);
    gate_stage(cfg, r);
  }

  /// forward, and dA += ∂(λ·L_reg_eff)/∂A with the gradients of w_reg, b_reg, the <NUM>
  /// class's weights, bias and threshold (the gate's path through P_<NUM>), into g:
  ///   ∂/∂Y = (λ/N_num)·gate·∂nll/∂Y,   ∂/∂P_<NUM> = (λ/N_num)·(1 − α)·nll
  static void loss_and_gradient(const typename Action<T>::Params& p, Individuals<const T> A,
                                const std::vector<std::uint8_t>& num, TensorView<const T, 1> targets,
                                const CausalConfig& cfg, Rows& r, const typename Action<T>::Grads& g,
                                CauchyViewGrad<T, 2> dA) {
    const std::size_t M = A.loc.shape[0], C = A.loc.shape[1];
    const auto k_num = static_cast<std::size_t>(cfg.num_token_id);
    cauchy_stage(p, A, num, targets, cfg, r, true);
    gate_stage(cfg, r);
    factor_stage(cfg, num, r);
    const Work& f = r.work;
    const T* w = p.reg_weight.values.data;
    const T* w_num = p.cls_weight.values.data + k_num * C;
    T* dw = g.reg_weight.values.data;
    T* dw_num = g.cls_weight.values.data + k_num * C;
    for (std::size_t m = 0; m < M; ++m) {
      if (!num[m]) continue;
      const T* la = A.loc.data + m * C;
      const T* sa = A.scale.data + m * C;
      T* dla = dA.d_loc.data + m * C;
      T* dsa = dA.d_scale.data + m * C;
      const T d_loc_y = f.d_loc_Y[m], d_scale_y = f.d_scale_Y[m], d_loc_s = f.d_loc_S[m], d_scale_s = f.d_scale_S[m];
      for (std::size_t j = 0; j < C; ++j) {
        dla[j] += d_loc_y * w[j] + d_loc_s * w_num[j];
        dsa[j] += d_scale_y * std::fabs(w[j]) + d_scale_s * std::fabs(w_num[j]);
        dw[j] += d_loc_y * la[j] + Action<T>::sign(w[j]) * d_scale_y * sa[j];
        dw_num[j] += d_loc_s * la[j] + Action<T>::sign(w_num[j]) * d_scale_s * sa[j];
      }
      g.reg_bias[0] += d_loc_y;
      g.cls_bias[k_num] += d_loc_s;
      g.threshold[k_num] += f.d_threshold[m];
    }
  }

 private:
  static TensorView<T, 1> out(std::vector<T>& v) { return {v.data(), {v.size()}}; }
  static auto in(const std::vector<T>& v) { return autodiff::constant(TensorView<const T, 1>(v.data(), {v.size()})); }

  /// Stage 1, position by position: Y = the value head's linear map of A (with its floor),
  /// S_<NUM> = the <NUM> class's, the head's loss of y under Y (value and ∂/∂Y, computed
  /// together), P_<NUM> = P(S_<NUM> > C_<NUM>) (with ∂/∂S_<NUM>, ∂/∂C_<NUM> when `derivatives`).
  static void cauchy_stage(const typename Action<T>::Params& p, Individuals<const T> A, const std::vector<std::uint8_t>& num,
                           TensorView<const T, 1> targets, const CausalConfig& cfg, Rows& r, bool derivatives) {
    const std::size_t M = A.loc.shape[0];
    const auto k_num = static_cast<std::size_t>(cfg.num_token_id);
    Work& f = r.work;
    for (auto* v : {&r.loc_Y, &r.scale_Y, &r.nll, &r.P_num, &r.gate, &r.L_reg_gated, &f.is_num, &f.nll, &f.P}) v->resize(M);
    for (auto* v : {&f.d_loc_nll, &f.d_scale_nll, &f.dP_d_loc, &f.dP_d_scale, &f.dP_d_threshold}) v->resize(derivatives ? M : 0);
    for (std::size_t m = 0; m < M; ++m) {
      const auto a = row_of(A, m);
      const CauchyParams<T> Y = value_with_floor(Action<T>::value(p, a), cfg), S_num = Action<T>::class_score(p, k_num, a);
      const T y = targets.empty() ? T(0) : targets[m];
      const auto nll = regression_loss_grad(cfg.reg_head, y, Y.loc, Y.scale);  // the head's loss (nll for cauchy)
      const auto P = raw::ovr_prob_grad(S_num.loc, S_num.scale, p.threshold[k_num]);
      r.loc_Y[m] = Y.loc;
      r.scale_Y[m] = Y.scale;
      r.nll[m] = nll.value;
      r.P_num[m] = P.value;
      const bool at = num[m] != 0;  // where m = 1: the chains' operands; 0 elsewhere
      f.is_num[m] = at ? T(1) : T(0);
      f.nll[m] = at ? nll.value : T(0);
      f.P[m] = at ? P.value : T(0);
      if (derivatives) {
        f.d_loc_nll[m] = at ? nll.d_loc : T(0);
        f.d_scale_nll[m] = at ? nll.d_scale : T(0);
        f.dP_d_loc[m] = at ? P.d_loc : T(0);
        f.dP_d_scale[m] = at ? P.d_scale : T(0);
        f.dP_d_threshold[m] = at ? P.d_threshold : T(0);
      }
    }
  }

  /// Stage 2 over [M]:  gate = m·(α + (1 − α)·P_<NUM>),  L_reg_gated = gate·nll.
  static void gate_stage(const CausalConfig& cfg, Rows& r) {
    const T alpha = static_cast<T>(cfg.alpha_gate);
    const Work& f = r.work;
    autodiff::eval(out(r.gate), in(f.is_num) * (alpha + (T(1) - alpha) * in(f.P)));
    autodiff::eval(out(r.L_reg_gated), in(r.gate) * in(f.nll));
  }

  /// Stage 3 over [M], the backward's factors (c = λ/N_num):
  ///   ∂L/∂loc_Y = c·gate·∂nll/∂loc_Y,   ∂L/∂scale_Y = c·gate·∂nll/∂scale_Y,
  ///   ∂L/∂P = c·(1 − α)·nll,   ∂L/∂loc_S = ∂L/∂P·∂P/∂loc_S,   ∂L/∂scale_S = ∂L/∂P·∂P/∂scale_S,
  ///   ∂L/∂C_<NUM> = ∂L/∂P·∂P/∂C_<NUM>   (each product rounded before the accumulation adds it).
  static void factor_stage(const CausalConfig& cfg, const std::vector<std::uint8_t>& num, Rows& r) {
    std::size_t n_num = 0;
    for (auto v : num) n_num += v;
    const T lambda = static_cast<T>(cfg.reg_loss_weight), alpha = static_cast<T>(cfg.alpha_gate);
    const T per_num = lambda / static_cast<T>(std::max<std::size_t>(n_num, 1));
    const T per_P = per_num * (T(1) - alpha);
    Work& f = r.work;
    for (auto* v : {&f.d_loc_Y, &f.d_scale_Y, &f.d_P, &f.d_loc_S, &f.d_scale_S, &f.d_threshold}) v->resize(r.gate.size());
    autodiff::eval(out(f.d_loc_Y), per_num * in(r.gate) * in(f.d_loc_nll));
    autodiff::eval(out(f.d_scale_Y), per_num * in(r.gate) * in(f.d_scale_nll));
    autodiff::eval(out(f.d_P), per_P * in(f.nll));
    autodiff::eval(out(f.d_loc_S), in(f.d_P) * in(f.dP_d_loc));
    autodiff::eval(out(f.d_scale_S), in(f.d_P) * in(f.dP_d_scale));
    autodiff::eval(out(f.d_threshold), in(f.d_P) * in(f.dP_d_threshold));
  }
};

/// The OvR BCE over the whole vocabulary, chunk by chunk (see the file comment).
template <class T>
class OvrLoss {
 public:
  struct Rows {
    std::vector<T> L_cls, prob_sum;    // [M] Σ_k BCE, Σ_k P_k
    std::vector<std::int64_t> pred;    // [M] argmax_k P_k; −1 where not evaluated
    std::vector<T> max_prob;           // [M] max_k P_k = P of the class `pred`; 0 where not evaluated
  };

  explicit OvrLoss(std::size_t class_chunk = 2048) : chunk_(class_chunk) {
    detail::require(chunk_ > 0, "OvrLoss", "class_chunk must be > 0");
  }

  /// Evaluates the rows `rows` (positions with a label or a token): L_cls, Σ_k P_k, argmax_k P_k
  /// and max_k P_k = ½ + atan(z*)/π from the row's largest margin z* (P rises with the margin).
  /// `valid[m]`: position m has a label, whose BCE enters the mean over n_valid positions.
  /// |W_cls| is read from p.cls_weight.abs (the model's store keeps it per parameter version),
  /// needed beyond linalg::fused_rows_max rows.
  void forward(const typename Action<T>::Params& p, Individuals<const T> A, const std::vector<std::size_t>& rows,
               const std::vector<std::uint8_t>& valid, std::size_t n_valid, TensorView<const std::int64_t, 1> labels,
               const CausalConfig& cfg, Rows& out) {
    const std::size_t K = cfg.num_classes, R = rows.size();
    const Individuals<const T> A_r = begin(A, rows, K, out);  // [R,C]
    if (R == 0) return;
    const T weight = T(1) / static_cast<T>(std::max<std::size_t>(n_valid, 1));
    const std::size_t Kc = std::min(chunk_, K);
    for (std::size_t k0 = 0; k0 < K; k0 += Kc) {
      const std::size_t n = std::min(Kc, K - k0);
      const ClassScores<const T> S = scores(p, A_r, k0, n, p.cls_weight.rows(k0, n).abs);  // [R,n]
      parallel_for(R, R * n, [&](std::size_t r) { score_row(S, r, p.threshold.data + k0, rows, valid, labels, k0, weight, {}, cfg); });
    }
    finish(rows, A.loc.shape[1], out);
  }

  /// forward's values (|W_cls| formed chunk by chunk: it changes after every update), and
  /// dA += ∂L_cls_mean/∂A with the gradients of W_cls, b_cls and the thresholds into g, each
  /// chunk's ∂L/∂S [R,n] taken back through the class map before the next chunk is scored
  /// (weight products offered to `sink` first).
  void loss_and_gradient(const typename Action<T>::Params& p, Individuals<const T> A, const std::vector<std::size_t>& rows,
                         const std::vector<std::uint8_t>& valid, std::size_t n_valid,
                         TensorView<const std::int64_t, 1> labels, const CausalConfig& cfg, Rows& out,
                         const typename Action<T>::Grads& g, CauchyViewGrad<T, 2> dA,
                         linalg::WeightGradSink<T>* sink = nullptr) {
    const std::size_t C = A.loc.shape[1], K = cfg.num_classes, R = rows.size();
    const Individuals<const T> A_r = begin(A, rows, K, out);  // [R,C]
    if (R == 0) return;
    const T weight = T(1) / static_cast<T>(std::max<std::size_t>(n_valid, 1));
    d_loc_r_.assign(R * C, T(0));
    d_scale_r_.assign(R * C, T(0));
    const std::size_t Kc = std::min(chunk_, K);
    // with a bf16 copy of W_cls (read from chunks starting at a multiple of 4 rows) the products
    // read |W| from the copy, so no chunk of |W| in float is formed (the view keeps its shape,
    // with no data behind it)
    const bool abs_from_copy = p.cls_weight.abs_from_copy() && chunk_ % linalg::panel_rows == 0;
    abs_chunk_.resize(abs_from_copy ? 0 : Kc * C);
    d_loc_s_.resize(R * Kc);
    d_scale_s_.resize(R * Kc);
    for (std::size_t k0 = 0; k0 < K; k0 += Kc) {
      const std::size_t n = std::min(Kc, K - k0);
      const TensorView<const T, 2> w_chunk(p.cls_weight.values.data + k0 * C, {n, C});
      if (!abs_from_copy) parallel_for(n * C, n * C, [&](std::size_t i) { abs_chunk_[i] = std::fabs(w_chunk.data[i]); });
      const TensorView<const T, 2> abs_chunk(abs_from_copy ? nullptr : abs_chunk_.data(), {n, C});
      const ClassScores<const T> S = scores(p, A_r, k0, n, abs_chunk);  // [R,n]
      parallel_for(R, R * n, [&](std::size_t r) {
        OvrRowGrads<T> row_grads{&d_loc_s_[r * n], &d_scale_s_[r * n], nullptr};  // bce_row writes all n
        if (!valid[rows[r]]) {  // a row without a label adds no gradient
          std::fill_n(&d_loc_s_[r * n], n, T(0));
          std::fill_n(&d_scale_s_[r * n], n, T(0));
          row_grads = {};
        }
        score_row(S, r, p.threshold.data + k0, rows, valid, labels, k0, weight, row_grads, cfg);
      });
      const CauchyViewGrad<const T, 2> dS{TensorView<const T, 2>(d_loc_s_.data(), {R, n}),
                                          TensorView<const T, 2>(d_scale_s_.data(), {R, n})};  // [R,n]
      linalg::cauchy_linear_backward<T>({TensorView<T, 2>(d_loc_r_.data(), {R, C}), TensorView<T, 2>(d_scale_r_.data(), {R, C})},
                                        {g.cls_weight.values.data + k0 * C, {n, C}}, dS,
                                        p.cls_weight.rows(k0, n).with_abs(abs_chunk), A_r, sink);
      // ∂/∂b_cls = colsum(∂/∂loc_S); every term depends on (loc_S − C_k), so ∂/∂C_k = −colsum
      std::fill_n(col_.begin(), n, T(0));
      linalg::bias_backward<T>({col_.data(), {n}}, dS.d_loc);
      for (std::size_t k = 0; k < n; ++k) {
        g.cls_bias[k0 + k] += col_[k];
        g.threshold[k0 + k] -= col_[k];
      }
    }
    finish(rows, C, out, [&](std::size_t r, std::size_t m) {  // dA [M,C] += the rows' ∂L/∂A_r
      for (std::size_t j = 0; j < C; ++j) {
        dA.d_loc.data[m * C + j] += d_loc_r_[r * C + j];
        dA.d_scale.data[m * C + j] += d_scale_r_[r * C + j];
      }
    });
  }

 private:
  /// Clears `out` [M], gathers the evaluated rows A_r [R,C] and sizes the per-row and per-chunk
  /// scratch; returns A_r.
  Individuals<const T> begin(Individuals<const T> A, const std::vector<std::size_t>& rows, std::size_t K, Rows& out) {
    const std::size_t M = A.loc.shape[0], C = A.loc.shape[1], R = rows.size();
    out.L_cls.assign(M, T(0));
    out.prob_sum.assign(M, T(0));
    out.pred.assign(M, -1);
    out.max_prob.assign(M, T(0));
    if (R == 0) return A;
    loc_r_.resize(R * C);
    scale_r_.resize(R * C);
    parallel_for(R, 2 * R * C, [&](std::size_t r) {
      std::copy_n(A.loc.data + rows[r] * C, C, &loc_r_[r * C]);
      std::copy_n(A.scale.data + rows[r] * C, C, &scale_r_[r * C]);
    });
    stats_.assign(R, OvrRowStats<T>{});
    loss_r_.assign(R, T(0));
    const std::size_t Kc = std::min(chunk_, K);
    loc_s_.resize(R * Kc);
    scale_s_.resize(R * Kc);
    col_.resize(Kc);
    return result_view(ops::select{}, A, CauchyOut<const T, 2>{{loc_r_.data(), {R, C}}, {scale_r_.data(), {R, C}}});
  }

  /// S [R,n] of the classes k0…k0+n−1: the action's linear map of A_r (marginal).
  ClassScores<const T> scores(const typename Action<T>::Params& p, Individuals<const T> A_r, std::size_t k0, std::size_t n,
                              TensorView<const T, 2> abs_chunk) {
    const std::size_t R = A_r.loc.shape[0];
    return Action<T>::classes(p, A_r, k0, n, abs_chunk,
                              {TensorView<T, 2>(loc_s_.data(), {R, n}), TensorView<T, 2>(scale_s_.data(), {R, n})});
  }

  /// Row r of the chunk at k0 (thresholds thr[0…n)): its BCE (into the row's loss where it has a label) and statistics,
  /// its ∂/∂S into `grads` where they point.
  void score_row(ClassScores<const T> S, std::size_t r, const T* thr, const std::vector<std::size_t>& rows,
                 const std::vector<std::uint8_t>& valid, TensorView<const std::int64_t, 1> labels, std::size_t k0,
                 T weight, OvrRowGrads<T> grads, const CausalConfig& cfg) {
    const std::size_t m = rows[r];
    const std::int64_t label_local = valid[m] ? labels[m] - static_cast<std::int64_t>(k0) : -1;
    OvrRowStats<T> chunk_stats;
    const T row_loss = bce_row(S, r, thr, label_local, weight, grads, chunk_stats, cfg);
    if (valid[m]) loss_r_[r] += row_loss;
    merge_stats(stats_[r], chunk_stats, k0);
  }

  struct Nothing {
    void operator()(std::size_t, std::size_t) const {}
  };
  /// out [M] from the rows' sums and statistics, with `also(r, m)` for each row r at position m.
  template <class Also = Nothing>
  void finish(const std::vector<std::size_t>& rows, std::size_t C, Rows& out, Also also = {}) {
    const std::size_t R = rows.size();
    parallel_for(R, 2 * R * C, [&](std::size_t r) {  // rows are distinct positions
      const std::size_t m = rows[r];
      out.L_cls[m] = loss_r_[r];
      out.prob_sum[m] = stats_[r].prob_sum;
      out.pred[m] = stats_[r].best_index;
      if (stats_[r].best_index >= 0) out.max_prob[m] = raw::cdf(stats_[r].best_margin, T(0), T(1));
      also(r, m);
    });
  }

  /// Σ_k BCE of row r of a chunk of S, with its gradients and statistics.
  static T bce_row(ClassScores<const T> S, std::size_t r, const T* thr, std::int64_t label, T weight,
                   OvrRowGrads<T> grads, OvrRowStats<T>& stats, const CausalConfig& cfg) {
    const std::size_t n = S.loc.shape[1];
    const std::span<const T> loc(S.loc.data + r * n, n), scale(S.scale.data + r * n, n);
    if (cfg.bce_form == BceForm::stable)
      return ovr_bce_row<T>(loc, scale, RowThresholds<T>::per_class_span({thr, n}), label, weight, grads, &stats);
    T loss = 0;  // the ε-form log(P + ε), log(1 − P + ε), scalar: for comparison with the original code
    const T eps = static_cast<T>(cfg.bce_epsilon);
    for (std::size_t k = 0; k < n; ++k) {
      const T y = static_cast<std::int64_t>(k) == label ? T(1) : T(0);
      const auto b = raw::ovr_bce_eps_grad(y, loc[k], scale[k], thr[k], eps);
      loss += b.value;
      stats.add(k, raw::ovr_margin(loc[k], scale[k], thr[k]), raw::ovr_prob(loc[k], scale[k], thr[k]));
      if (grads.d_loc) grads.d_loc[k] = weight * b.d_loc;
      if (grads.d_scale) grads.d_scale[k] = weight * b.d_scale;
    }
    return loss;
  }

  /// Folds a chunk's Σ P and best margin (indices local to the chunk at k0) into the row's.
  static void merge_stats(OvrRowStats<T>& row, const OvrRowStats<T>& chunk, std::size_t k0) {
    row.prob_sum += chunk.prob_sum;
    const bool better = chunk.best_index >= 0 && chunk.best_margin > row.best_margin;
    const bool first = row.best_index < 0 && chunk.best_index >= 0;  // all margins NaN/−∞ so far
    if (better || first) {
      row.best_margin = chunk.best_margin;
      row.best_index = chunk.best_index + static_cast<std::int64_t>(k0);
    }
  }

  std::size_t chunk_;
  std::vector<T> loc_r_, scale_r_, d_loc_r_, d_scale_r_, loc_s_, scale_s_, d_loc_s_, d_scale_s_, col_, abs_chunk_, loss_r_;
  std::vector<OvrRowStats<T>> stats_;
};

}  // namespace causalqwen::model
