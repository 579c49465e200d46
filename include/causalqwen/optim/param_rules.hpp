/// Which parameters an optimiser step touches, and which of them get weight decay, decided by
/// the arena's slot names (Hugging Face names plus `causal.*`, DESIGN §6).
///
///   trained     Freeze::none: every slot; Freeze::backbone: only `causal.*` slots (the
///               abduction and action networks, b_noise, the numeric direction vector and,
///               when learnable, the thresholds). `causal.ovr_threshold` is trained only
///               with `learn_threshold` (DESIGN §2: a fixed C = 10 by default).
///   no decay    names ending in `norm.weight` (input_layernorm, post_attention_layernorm,
///               model.norm), every `.bias`, `causal.action.b_noise`, `causal.ovr_threshold`,
///               `causal.num_direction`; plus any name in `extra_no_decay`.
///   decay       everything else (projection weights, embeddings, W_loc, W_scale, W_cls, w_reg).
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::optim {

/// What is trained: everything, or the causal heads alone with the backbone frozen.
enum class Freeze { none, backbone };

struct ParamRules {
  Freeze freeze = Freeze::none;
  bool learn_threshold = false;               // train causal.ovr_threshold
  std::vector<std::string> extra_no_decay;    // exact slot names excluded from weight decay

  /// True when an optimiser step may change slot `name`.
  bool trained(std::string_view name) const {
    if (name == "causal.ovr_threshold") return learn_threshold;
    if (freeze == Freeze::backbone) return name.starts_with("causal.");
    return true;
  }

  /// True when slot `name` gets decoupled weight decay (see the file comment).
  bool decays(std::string_view name) const {
    if (name.ends_with("norm.weight") || name.ends_with(".bias") || name == "causal.action.b_noise" ||
        name == "causal.ovr_threshold" || name == "causal.num_direction")
      return false;
    return std::find(extra_no_decay.begin(), extra_no_decay.end(), name) == extra_no_decay.end();
  }
};

/// "none" → Freeze::none, "backbone" → Freeze::backbone; anything else returns false.
inline bool parse_freeze(std::string_view text, Freeze& out) {
  if (text == "none") out = Freeze::none;
  else if (text == "backbone") out = Freeze::backbone;
  else return false;
  return true;
}

}  // namespace causalqwen::optim
