/// One decoding step of the causal heads for R rows: from z [R,H] (each row's last position)
/// and the rows' noise, the next token, its number and what the mode's distribution says
/// about them (formulas per mode in decode_mode.hpp):
///   Abduction  loc_U = z·W_locᵀ + b_loc,  scale_U = softplus(z·W_scaleᵀ + b_scale)   [R,C]
///   Action     loc_A, scale_A by mode;  loc_S, scale_S = vocab_scores(loc_A, scale_A) [R,K]
///   Decision   argmax_k (loc_S − C_k)/scale_S  (= argmax_k P_k, monotone), or the causal /
///              compatible rules; ties go to the lowest id; NaN never wins
///   Number     loc_Y = w_reg·loc_A + b_reg,  scale_Y = |w_reg|·scale_A
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/cauchy/ovr.hpp"
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/gemv.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/decode_mode.hpp"
#include "causalqwen/model/head_params.hpp"
#include "causalqwen/model/vocab_scores.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace causalqwen::model {

/// What one step chose for one row.
struct StepDecision {
  std::int64_t token = -1;
  double value = 0;   // loc_Y of the mode's action distribution (causal: y of the individual)
  double scale = 0;   // scale_Y of that distribution (causal: |w_reg|·scale_U, U's own spread)
  double p_num = 0;   // P(S_<NUM> > C_<NUM>) under the mode's distribution (causal: under U,
                      // compatible: the deterministic one)
  double score = 0;   // the winning margin z_k, s_k, or loc_S_k (compatible), for diagnostics
};

/// The noise of a step: per row, C uniforms in (0,1) for sampling / causal ([R,C]) and one
/// uniform for compatible sampling ([R]).
template <class T>
struct StepNoise {
  TensorView<const T, 2> action;       // [R,C]
  TensorView<const double, 1> pick;    // [R]
};

/// Index of the largest of x[0..n) (first on ties; NaN ignored; −1 if all NaN).
template <class T>
inline std::int64_t argmax_first(const T* x, std::size_t n) {
  std::int64_t best = -1;
  T bv = -std::numeric_limits<T>::infinity();
  for (std::size_t k = 0; k < n; ++k)
    if (x[k] > bv || (best < 0 && x[k] == bv)) {
      bv = x[k];
      best = static_cast<std::int64_t>(k);
    }
  return best;
}

/// A draw from softmax(logits / T) restricted to the top_k largest logits and then to the
/// smallest prefix (by decreasing logit, ties by id) whose mass reaches top_p; `u` ∈ (0,1).
template <class T>
inline std::int64_t sample_softmax(const T* logits, std::size_t K, double temperature, std::size_t top_k,
                                   double top_p, double u, std::vector<std::int64_t>& order,
                                   std::vector<double>& prob) {
  order.resize(K);
  std::iota(order.begin(), order.end(), std::int64_t{0});
  auto higher = [&](std::int64_t a, std::int64_t b) {
    const T la = logits[a], lb = logits[b];
    if (std::isnan(la) != std::isnan(lb)) return std::isnan(lb);
    return la > lb || (!(lb > la) && a < b);
  };
  std::size_t n = (top_k > 0 && top_k < K) ? top_k : K;
  if (n < K) {
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), higher);
    order.resize(n);
  }
  std::sort(order.begin(), order.end(), higher);
  const double mx = static_cast<double>(logits[order[0]]);
  prob.resize(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(logits[order[i]]);
    prob[i] = std::isnan(v) ? 0.0 : std::exp((v - mx) / temperature);
    total += prob[i];
  }
  if (top_p < 1.0) {  // keep the smallest prefix whose mass reaches top_p
    double acc = 0;
    std::size_t keep = n;
    for (std::size_t i = 0; i < n; ++i) {
      acc += prob[i] / total;
      if (acc >= top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    total = 0;
    for (std::size_t i = 0; i < n; ++i) total += prob[i];
  }
  const double target = u * total;
  double acc = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acc += prob[i];
    if (target < acc) return order[i];
  }
  return order[n - 1];
}

template <class T>
class NextTokenHead {
 public:
  explicit NextTokenHead(const CausalConfig& cfg) : cfg_(cfg) {}

  /// Decisions for R rows of z [R,H] (written into out[0..R)).
  void step(const HeadParams<const T>& p, std::uint64_t version, TensorView<const T, 2> z,
            const DecodeSettings& s, const StepNoise<T>& noise, std::span<StepDecision> out) {
    const std::size_t R = z.shape[0], C = cfg_.causal_size, K = cfg_.num_classes, H = cfg_.hidden_size();
    require_shape(z, {R, H}, "NextTokenHead::step", "z");
    detail::require(out.size() >= R, "NextTokenHead::step", "room for {} decisions, need {}", out.size(), R);
    const bool noisy = s.mode == GenerationMode::sampling || s.mode == GenerationMode::causal;
    if (noisy) require_shape(noise.action, {R, C}, "NextTokenHead::step", "action uniforms");
    const bool pick = s.mode == GenerationMode::compatible && s.temperature > 0;
    if (pick) require_shape(noise.pick, {R}, "NextTokenHead::step", "token-pick uniforms");
    loc_U_.resize(R * C);
    scale_U_.resize(R * C);
    loc_A_.resize(R * C);
    scale_A_.resize(R * C);
    abduction_product({loc_U_.data(), {R, C}}, z, p.loc_weight, p.loc_bias);
    abduction_product({scale_U_.data(), {R, C}}, z, p.scale_weight, p.scale_bias);
    for (auto& v : scale_U_) v = raw::softplus(v);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < C; ++j) {
        const std::size_t i = r * C + j;
        const T bn = std::fabs(p.b_noise[j]);
        switch (s.mode) {
          case GenerationMode::deterministic:
          case GenerationMode::compatible:
            loc_A_[i] = loc_U_[i];
            scale_A_[i] = scale_U_[i] + bn;
            break;
          case GenerationMode::sampling: {
            const T eps = raw::standard_quantile(noise.action.data[i]);
            loc_A_[i] = loc_U_[i] + static_cast<T>(s.temperature) * bn * eps;
            scale_A_[i] = scale_U_[i];
            break;
          }
          case GenerationMode::causal:
            loc_A_[i] = loc_U_[i] + scale_U_[i] * raw::standard_quantile(noise.action.data[i]);
            scale_A_[i] = scale_U_[i];
            break;
        }
      }
    // the vocabulary: scales only where the decision needs them
    const bool need_scale = s.mode == GenerationMode::deterministic || s.mode == GenerationMode::sampling;
    loc_S_.resize(R * K);
    scale_S_.resize(need_scale ? R * K : 0);
    vocab_scores<T>(p.cls_weight, p.cls_bias, version, {loc_A_.data(), {R, C}},
                    need_scale ? TensorView<const T, 2>(scale_A_.data(), {R, C}) : TensorView<const T, 2>{},
                    {loc_S_.data(), {R, K}},
                    need_scale ? TensorView<T, 2>(scale_S_.data(), {R, K}) : TensorView<T, 2>{}, abs_cache_);
    const auto num = static_cast<std::size_t>(cfg_.num_token_id);
    for (std::size_t r = 0; r < R; ++r) {
      StepDecision& d = out[r];
      const T* ls = loc_S_.data() + r * K;
      const T* la = loc_A_.data() + r * C;
      const T* sa = scale_A_.data() + r * C;
      switch (s.mode) {
        case GenerationMode::deterministic:
        case GenerationMode::sampling: {
          const T* ss = scale_S_.data() + r * K;
          margin_.resize(K);
          for (std::size_t k = 0; k < K; ++k) margin_[k] = (ls[k] - p.threshold[k]) / ss[k];
          d.token = argmax_first(margin_.data(), K);
          d.p_num = static_cast<double>(raw::ovr_prob(ls[num], ss[num], p.threshold[num]));
          break;
        }
        case GenerationMode::causal:
          if (s.subtract_threshold) {
            margin_.resize(K);
            for (std::size_t k = 0; k < K; ++k) margin_[k] = ls[k] - p.threshold[k];
            d.token = argmax_first(margin_.data(), K);
          } else {
            d.token = argmax_first(ls, K);
          }
          d.p_num = p_num_of(p, loc_U_.data() + r * C, scale_U_.data() + r * C, T(0));
          break;
        case GenerationMode::compatible:
          d.token = pick ? sample_softmax(ls, K, s.temperature, s.top_k, s.top_p, noise.pick[r], order_, prob_)
                         : argmax_first(ls, K);
          d.p_num = p_num_of(p, loc_U_.data() + r * C, scale_U_.data() + r * C, T(1));
          break;
      }
      if (d.token < 0) d.token = 0;  // every score NaN: a broken model; emit class 0 rather than crash
      d.score = static_cast<double>(need_scale || (s.mode == GenerationMode::causal && s.subtract_threshold)
                                        ? margin_[static_cast<std::size_t>(d.token)]
                                        : ls[d.token]);
      T loc_y = p.reg_bias[0], scale_y = 0;
      for (std::size_t j = 0; j < C; ++j) {
        loc_y += p.reg_weight.data[j] * la[j];
        scale_y += std::fabs(p.reg_weight.data[j]) * sa[j];
      }
      d.value = static_cast<double>(loc_y);
      d.scale = static_cast<double>(scale_y);
    }
  }

  /// The last step's [R,C] and [R,K] intermediates (for tests and reports).
  const std::vector<T>& loc_U() const { return loc_U_; }
  const std::vector<T>& scale_U() const { return scale_U_; }
  const std::vector<T>& loc_A() const { return loc_A_; }
  const std::vector<T>& scale_A() const { return scale_A_; }
  const std::vector<T>& loc_S() const { return loc_S_; }
  const std::vector<T>& scale_S() const { return scale_S_; }

 private:
  /// y = z·Wᵀ + b: a few rows read W once (linalg/gemv.hpp), more use the GEMM.
  static void abduction_product(TensorView<T, 2> y, TensorView<const T, 2> z, TensorView<const T, 2> w,
                                TensorView<const T, 1> b) {
    if (z.shape[0] <= linalg::few_rows_max)
      linalg::few_rows_linear_forward<T>(y, z, w, b);
    else
      linalg::linear_forward<T>(y, z, w, b);
  }

  /// P(S_<NUM> > C) for U = (loc, scale + with_noise·|b_noise|).
  double p_num_of(const HeadParams<const T>& p, const T* loc, const T* scale, T with_noise) const {
    const std::size_t C = cfg_.causal_size, num = static_cast<std::size_t>(cfg_.num_token_id);
    const T* w = p.cls_weight.data + num * C;
    T l = p.cls_bias[num], sc = 0;
    for (std::size_t j = 0; j < C; ++j) {
      l += w[j] * loc[j];
      sc += std::fabs(w[j]) * (scale[j] + with_noise * std::fabs(p.b_noise[j]));
    }
    return static_cast<double>(raw::ovr_prob(l, sc, p.threshold[num]));
  }

  CausalConfig cfg_;
  std::vector<T> loc_U_, scale_U_, loc_A_, scale_A_, loc_S_, scale_S_, margin_;
  std::vector<std::int64_t> order_;
  std::vector<double> prob_;
  linalg::AbsWeightCache<T> abs_cache_;
};

}  // namespace causalqwen::model
