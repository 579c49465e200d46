/// The model's rules for optimisers, stated as data over its slot names (core/param_rules.hpp):
///
///   groups      backbone: the Qwen2 slots (Hugging Face names, `model.*`, `lm_head.*`);
///               heads: the `causal.*` slots (abduction, action, b_noise, the thresholds and the
///               numeric direction vector of the embedding)
///   trained     every slot of the groups not frozen (Freeze::backbone trains the heads alone,
///               Freeze::heads the backbone alone); `causal.ovr_threshold` only with
///               `learn_threshold` (the OvR threshold is a fixed C = 10 by default)
///   no decay    names ending in `norm.weight` (input_layernorm, post_attention_layernorm,
///               model.norm), every `.bias`, `causal.action.b_noise`, `causal.ovr_threshold`,
///               `causal.num_direction`
///   decay       everything else (projection weights, embeddings, W_loc, W_scale, W_cls, w_reg)
///   scale bias  `causal.abduction.scale.bias`: scale_U = softplus(W_scale·z + b_scale), the
///               slot a scale clamp bounds (optim/scale_clamp.hpp)
///
///   auto rules = cq::model::parameter_rules(model.layout(), {.freeze = cq::model::Freeze::backbone});
///   cq::optim::AdamW<float> adam(model.params().shared_layout(), {}, rules);
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/param_rules.hpp"
#include "causalqwen/model/slot_names.hpp"

#include <string_view>

namespace causalqwen::model {

/// The two groups of the model's parameters (file comment).
enum class ParameterGroup { backbone, heads };

/// The group of slot `name`: heads for `causal.*`, backbone otherwise.
inline ParameterGroup parameter_group(std::string_view name) {
  return name.starts_with("causal.") ? ParameterGroup::heads : ParameterGroup::backbone;
}

/// Which group an optimiser leaves unchanged: none, the backbone (train the heads alone) or the
/// heads (train the backbone alone).
enum class Freeze { none, backbone, heads };

/// "none", "backbone" or "heads" → `out`; anything else returns false and leaves `out` alone.
inline bool parse_freeze(std::string_view text, Freeze& out) {
  if (text == "none") out = Freeze::none;
  else if (text == "backbone") out = Freeze::backbone;
  else if (text == "heads") out = Freeze::heads;
  else return false;
  return true;
}

/// The choices a training run makes about the model's parameters.
struct ParameterOptions {
  Freeze freeze = Freeze::none;
  bool learn_threshold = false;  ///< train causal.ovr_threshold (fixed by default)
};

/// True when slot `name` gets weight decay (file comment).
inline bool decays(std::string_view name) {
  return !(name.ends_with("norm.weight") || name.ends_with(".bias") || name == names::b_noise ||
           name == names::threshold || name == names::num_direction);
}

/// True when an optimiser step may change slot `name` under `options` (file comment).
inline bool trained(std::string_view name, const ParameterOptions& options) {
  if (name == names::threshold && !options.learn_threshold) return false;
  switch (options.freeze) {
    case Freeze::backbone: return parameter_group(name) == ParameterGroup::heads;
    case Freeze::heads: return parameter_group(name) == ParameterGroup::backbone;
    case Freeze::none: break;
  }
  return true;
}

/// The rules for the slots of `layout` (the whole model's, the heads' alone, …) under `options`.
inline ParamRules parameter_rules(const Layout& layout, const ParameterOptions& options = {}) {
  ParamRules rules;
  for (const auto& slot : layout.slots()) {
    if (!trained(slot.name, options)) rules.frozen.insert(slot.name);
    if (!decays(slot.name)) rules.no_decay.insert(slot.name);
  }
  rules.scale_bias = names::abd_scale_b;
  return rules;
}

}  // namespace causalqwen::model
