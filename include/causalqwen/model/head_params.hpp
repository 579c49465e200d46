/// The causal heads' parameters (DESIGN §6 names) and their initialisation (seed 000, §2):
///   causal.abduction.loc.weight [C,H] = I,  .bias [C] = 0
///   causal.abduction.scale.weight [C,H] = 0, .bias [C] = softplus⁻¹(γ_init)
///   causal.action.cls.weight [K,C] = the base lm_head (first K rows), .bias [K] = 0
///   causal.action.reg.weight [1,C] ~ Xavier-uniform(gain 0.01), .bias [1] = reg_bias_init
///   causal.action.b_noise [C] = b_noise_init
///   causal.ovr_threshold [K] = ovr_threshold (one value or K values)
/// (causal.num_direction [H] belongs to the numeric embedding, in nn::Transformer.)
#pragma once
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/model/config.hpp"

#include <cmath>
#include <random>
#include <string>

namespace causalqwen::model {

namespace names {
inline const std::string abd_loc_w = "causal.abduction.loc.weight";
inline const std::string abd_loc_b = "causal.abduction.loc.bias";
inline const std::string abd_scale_w = "causal.abduction.scale.weight";
inline const std::string abd_scale_b = "causal.abduction.scale.bias";
inline const std::string cls_w = "causal.action.cls.weight";
inline const std::string cls_b = "causal.action.cls.bias";
inline const std::string reg_w = "causal.action.reg.weight";
inline const std::string reg_b = "causal.action.reg.bias";
inline const std::string b_noise = "causal.action.b_noise";
inline const std::string threshold = "causal.ovr_threshold";
}  // namespace names

/// Adds the heads' slots (in the order above) to a layout.
inline void add_head_params(Layout& layout, const CausalConfig& cfg) {
  const std::size_t C = cfg.causal_size, H = cfg.hidden_size(), K = cfg.num_classes;
  layout.add(names::abd_loc_w, {C, H});
  layout.add(names::abd_loc_b, {C});
  layout.add(names::abd_scale_w, {C, H});
  layout.add(names::abd_scale_b, {C});
  layout.add(names::cls_w, {K, C});
  layout.add(names::cls_b, {K});
  layout.add(names::reg_w, {1, C});
  layout.add(names::reg_b, {1});
  layout.add(names::b_noise, {C});
  layout.add(names::threshold, {K});
}

/// Views of the heads' parameters (or of their gradients) in an arena.
template <class T>
struct HeadParams {
  TensorView<T, 2> loc_weight, scale_weight;  // [C,H]
  TensorView<T, 1> loc_bias, scale_bias;      // [C]
  TensorView<T, 2> cls_weight;                // [K,C]
  TensorView<T, 1> cls_bias;                  // [K]
  TensorView<T, 2> reg_weight;                // [1,C]
  TensorView<T, 1> reg_bias;                  // [1]
  TensorView<T, 1> b_noise;                   // [C]
  TensorView<T, 1> threshold;                 // [K]

  template <class A>
  static HeadParams bind(A& arena) {
    return {arena.template view<2>(names::abd_loc_w), arena.template view<2>(names::abd_scale_w),
            arena.template view<1>(names::abd_loc_b), arena.template view<1>(names::abd_scale_b),
            arena.template view<2>(names::cls_w),     arena.template view<1>(names::cls_b),
            arena.template view<2>(names::reg_w),     arena.template view<1>(names::reg_b),
            arena.template view<1>(names::b_noise),   arena.template view<1>(names::threshold)};
  }
};

/// Initialises every head parameter except cls.weight (which the caller copies from the base
/// lm_head, or draws, see init_cls_random). Deterministic for a given seed.
template <class T>
void init_heads(Arena<T>& params, const CausalConfig& cfg, std::uint64_t seed) {
  auto p = HeadParams<T>::bind(params);
  const std::size_t C = cfg.causal_size, H = cfg.hidden_size();
  std::fill(p.loc_weight.begin(), p.loc_weight.end(), T(0));
  for (std::size_t i = 0; i < std::min(C, H); ++i) p.loc_weight(i, i) = T(1);
  std::fill(p.loc_bias.begin(), p.loc_bias.end(), T(0));
  std::fill(p.scale_weight.begin(), p.scale_weight.end(), T(0));
  std::fill(p.scale_bias.begin(), p.scale_bias.end(), static_cast<T>(inv_softplus(cfg.gamma_init)));
  std::fill(p.cls_bias.begin(), p.cls_bias.end(), T(0));
  // Xavier-uniform for a [1,C] weight: U(−a, a), a = gain·√(6/(fan_in + fan_out))
  std::mt19937_64 rng(seed);
  const double bound = cfg.reg_init_gain * std::sqrt(6.0 / static_cast<double>(C + 1));
  std::uniform_real_distribution<double> uniform(-bound, bound);
  for (auto& w : p.reg_weight) w = static_cast<T>(uniform(rng));
  p.reg_bias[0] = static_cast<T>(cfg.reg_bias_init);
  std::fill(p.b_noise.begin(), p.b_noise.end(), static_cast<T>(cfg.b_noise_init));
  for (std::size_t k = 0; k < cfg.num_classes; ++k) p.threshold[k] = static_cast<T>(cfg.threshold(k));
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

}  // namespace causalqwen::model
