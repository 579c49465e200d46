/// One decoding step of the causal heads for R rows: from z [R,H] (each row's last position)
/// and the rows' noise, the next token, its number and what the mode's distribution says
/// about them (formulas per mode in decode_mode.hpp), through the model's own layers:
///   Abduction  U = Abduction::forward(z)                                    [R,C] independent
///   Action     A = Action::noise(U) by mode (causal: U shifted onto an individual u drawn
///              from it, shift_to_draw)
///              S = Action::classes(A): loc_S, scale_S, W_cls read once     [R,K] marginal
///   Decision   argmax_k (loc_S − C_k)/scale_S  (= argmax_k P_k, monotone), or the causal /
///              compatible rules; ties go to the lowest id; NaN never wins
///   Number     Y = Action::value(A): loc_Y, scale_Y
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/cauchy/ovr.hpp"
#include "causalqwen/cauchy/shift_to_draw.hpp"
#include "causalqwen/generate/decode_mode.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/model/causal_head.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace causalqwen::generate {

using model::HeadParams;

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
  explicit NextTokenHead(const model::CausalConfig& cfg) : cfg_(cfg) {}

  /// Decisions for R rows of z [R,H] (written into out[0..R)). Beyond linalg::fused_rows_max
  /// rows the class scales read |W_cls| from p.action.cls_weight.abs (CausalQwen::head_params(R)).
  void step(const HeadParams<const T>& p, TensorView<const T, 2> z, const DecodeSettings& s, const StepNoise<T>& noise,
            std::span<StepDecision> out) {
    using model::Action;
    const std::size_t R = z.shape[0], C = cfg_.causal_size, K = cfg_.num_classes, H = cfg_.hidden_size();
    require_shape(z, {R, H}, "NextTokenHead::step", "z");
    detail::require(out.size() >= R, "NextTokenHead::step", "room for {} decisions, need {}", out.size(), R);
    const bool noisy = s.mode == GenerationMode::sampling || s.mode == GenerationMode::causal;
    if (noisy) require_shape(noise.action, {R, C}, "NextTokenHead::step", "action uniforms");
    const bool pick = s.mode == GenerationMode::compatible && s.temperature > 0;
    if (pick) require_shape(noise.pick, {R}, "NextTokenHead::step", "token-pick uniforms");
    const auto U = model::Abduction<T>::forward(p.abduction, z, abduction_, static_cast<T>(cfg_.scale_U_floor));  // independent [R,C]
    const model::SamplingNoise<T> location{static_cast<T>(s.temperature), noise.action};
    const auto A = Action<T>::noise(p.action, U, s.mode == GenerationMode::sampling ? model::ActionMode::sampling
                                                                                  : model::ActionMode::deterministic,
                                    location, action_);  // independent [R,C]
    // the causal mode's individual: U shifted onto a draw u = loc_U + scale_U·tan(π(ε − ½)) (loc u,
    // U's scale), independent as U; the other modes read A
    individual_.resize(s.mode == GenerationMode::causal ? R * C : 0);
    const model::Individuals<const T> shifted =
        s.mode == GenerationMode::causal ? shift_to_draw(U, noise.action, TensorView<T, 2>(individual_.data(), {R, C})) : A;
    // the vocabulary: scales only where the decision needs them
    const bool need_scale = s.mode == GenerationMode::deterministic || s.mode == GenerationMode::sampling;
    loc_S_.resize(R * K);
    scale_S_.resize(need_scale ? R * K : 0);
    const TensorView<T, 2> loc_S(loc_S_.data(), {R, K});
    if (need_scale)
      Action<T>::classes(p.action, A, 0, K, p.action.cls_weight.abs, {loc_S, TensorView<T, 2>(scale_S_.data(), {R, K})});
    else
      linalg::linear_forward<T>(loc_S, shifted.loc, p.action.cls_weight, p.action.cls_bias);
    const auto num = static_cast<std::size_t>(cfg_.num_token_id);
    for (std::size_t r = 0; r < R; ++r) {
      StepDecision& d = out[r];
      const T* ls = loc_S_.data() + r * K;
      // P(S_<NUM> > C_<NUM>) under the mode's distribution: A's, or U's for the causal mode
      const auto S_num = Action<T>::class_score(p.action, num, row_of(s.mode == GenerationMode::causal ? U : A, r));
      d.p_num = static_cast<double>(model::ovr_probability(S_num, p.action.threshold[num]));
      switch (s.mode) {
        case GenerationMode::deterministic:
        case GenerationMode::sampling: {
          const T* ss = scale_S_.data() + r * K;
          margin_.resize(K);
          for (std::size_t k = 0; k < K; ++k) margin_[k] = (ls[k] - p.action.threshold[k]) / ss[k];
          d.token = argmax_first(margin_.data(), K);
          break;
        }
        case GenerationMode::causal:
          if (s.subtract_threshold) {
            margin_.resize(K);
            for (std::size_t k = 0; k < K; ++k) margin_[k] = ls[k] - p.action.threshold[k];
            d.token = argmax_first(margin_.data(), K);
          } else {
            d.token = argmax_first(ls, K);
          }
          break;
        case GenerationMode::compatible:
          d.token = pick ? sample_softmax(ls, K, s.temperature, s.top_k, s.top_p, noise.pick[r], order_, prob_)
                         : argmax_first(ls, K);
          break;
      }
      if (d.token < 0) d.token = 0;  // every score NaN: a broken model; emit class 0 rather than crash
      d.score = static_cast<double>(need_scale || (s.mode == GenerationMode::causal && s.subtract_threshold)
                                        ? margin_[static_cast<std::size_t>(d.token)]
                                        : ls[d.token]);
      const auto Y = model::value_with_floor(Action<T>::value(p.action, row_of(shifted, r)), cfg_);
      d.value = static_cast<double>(Y.loc);
      d.scale = static_cast<double>(Y.scale);
    }
  }

  /// The last step's [R,C] and [R,K] intermediates (for tests and reports).
  const std::vector<T>& loc_U() const { return abduction_.loc_U; }
  const std::vector<T>& scale_U() const { return abduction_.scale_U; }
  const std::vector<T>& loc_A() const { return action_.loc_A; }
  const std::vector<T>& scale_A() const { return action_.scale_A; }
  const std::vector<T>& loc_S() const { return loc_S_; }
  const std::vector<T>& scale_S() const { return scale_S_; }

 private:
  model::CausalConfig cfg_;
  typename model::Abduction<T>::Cache abduction_;
  typename model::Action<T>::Cache action_;
  std::vector<T> individual_, loc_S_, scale_S_, margin_;
  std::vector<std::int64_t> order_;
  std::vector<double> prob_;
};

}  // namespace causalqwen::generate
