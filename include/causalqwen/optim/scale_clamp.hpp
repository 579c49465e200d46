/// Optional bounds on a softplus scale, applied to the parameters after each optimiser step.
/// A scale parameter must stay in a sane range because the Cauchy's heavy tails make large
/// gradients likely: scale_clipped = clamp(scale, ε, max).
///
/// What exactly is clamped: for scale = softplus(W·z + b) (the model's abduction scale scale_U)
/// the clamp acts on the bias slot b named by ParamRules::scale_bias:
///   b ← clamp(b, softplus⁻¹(min_scale), softplus⁻¹(max_scale))   (element-wise)
/// so the z-independent part softplus(b) — which is the scale itself wherever W·z = 0,
/// e.g. at initialisation (W_scale = 0) — stays in [min_scale, max_scale]. The z-dependent term
/// W·z is not bounded by this (the forward pass is unchanged and keeps exact gradients).
/// Bounds ≤ 0 (min) or non-finite (max) mean "no bound on that side".
#pragma once
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/param_rules.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace causalqwen::optim {

struct ScaleClamp {
  double min_scale = 0.0;                                     // ≤ 0: no lower bound
  double max_scale = std::numeric_limits<double>::infinity();  // inf: no upper bound

  bool active() const { return min_scale > 0 || std::isfinite(max_scale); }

  /// Clamps slot `rules.scale_bias` of `params` as in the file comment; returns how many values
  /// moved. DomainError when a bound is set and the rules name no scale bias.
  template <class T>
  std::size_t apply(Arena<T>& params, const ParamRules& rules) const {
    if (!active()) return 0;
    detail::require(!rules.scale_bias.empty(), "ScaleClamp",
                    "the parameter rules name no scale-bias slot to clamp (ParamRules::scale_bias is empty)");
    detail::require(!(min_scale > 0 && std::isfinite(max_scale)) || min_scale < max_scale, "ScaleClamp",
                    "min_scale {} must be below max_scale {}", min_scale, max_scale);
    const double lo = min_scale > 0 ? inv_softplus(min_scale) : -std::numeric_limits<double>::infinity();
    const double hi = std::isfinite(max_scale) ? inv_softplus(max_scale) : std::numeric_limits<double>::infinity();
    std::size_t moved = 0;
    for (auto& b : params.slot_span(rules.scale_bias)) {
      const double c = std::clamp(static_cast<double>(b), lo, hi);
      if (c != static_cast<double>(b)) {
        b = static_cast<T>(c);
        ++moved;
      }
    }
    return moved;
  }
};

}  // namespace causalqwen::optim
