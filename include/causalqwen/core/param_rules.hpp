/// Which parameter slots of an arena an optimiser step changes, which get weight decay, and
/// which slot holds a softplus scale's bias: plain data over slot names, given by the caller
/// (the model states its own rules in model/parameter_rules.hpp; optimisers know no names).
///   trained(slot)  ⇔  slot ∉ frozen
///   decays(slot)   ⇔  slot ∉ no_decay
/// The default (empty sets) trains and decays every slot and has no scale bias.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <string_view>

namespace causalqwen {

struct ParamRules {
  std::set<std::string, std::less<>> frozen;    ///< slots an optimiser step leaves unchanged
  std::set<std::string, std::less<>> no_decay;  ///< slots excluded from weight decay
  std::string scale_bias;  ///< slot b of a scale softplus(W·z + b) that a scale clamp bounds ("" : none)

  /// True when an optimiser step may change slot `name`.
  bool trained(std::string_view name) const { return !frozen.contains(name); }
  /// True when slot `name` gets weight decay.
  bool decays(std::string_view name) const { return !no_decay.contains(name); }
};

}  // namespace causalqwen
