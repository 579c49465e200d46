/// Optional bounds on the abduction scale (seed 003 §3.3.2: scale_clipped = clamp(scale, ε, max)),
/// applied to the parameters after each optimiser step.
///
/// What exactly is clamped: scale_U = softplus(W_scale·z + b_scale). The clamp acts on the bias:
///   b_scale ← clamp(b_scale, softplus⁻¹(min_scale), softplus⁻¹(max_scale))   (element-wise, [C])
/// so the z-independent part softplus(b_scale) — which is scale_U itself wherever W_scale·z = 0,
/// e.g. at initialisation (W_scale = 0) — stays in [min_scale, max_scale]. The z-dependent term
/// W_scale·z is not bounded by this (the forward pass is unchanged and keeps exact gradients).
/// Bounds ≤ 0 (min) or non-finite (max) mean "no bound on that side".
#pragma once
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace causalqwen::optim {

struct ScaleClamp {
  double min_scale = 0.0;                                     // ≤ 0: no lower bound
  double max_scale = std::numeric_limits<double>::infinity();  // inf: no upper bound
  std::string slot = "causal.abduction.scale.bias";

  bool active() const { return min_scale > 0 || std::isfinite(max_scale); }

  /// Clamps `slot` of `params` as in the file comment; returns how many values moved.
  template <class T>
  std::size_t apply(Arena<T>& params) const {
    if (!active()) return 0;
    detail::require(!(min_scale > 0 && std::isfinite(max_scale)) || min_scale < max_scale, "ScaleClamp",
                    "min_scale {} must be below max_scale {}", min_scale, max_scale);
    const double lo = min_scale > 0 ? inv_softplus(min_scale) : -std::numeric_limits<double>::infinity();
    const double hi = std::isfinite(max_scale) ? inv_softplus(max_scale) : std::numeric_limits<double>::infinity();
    std::size_t moved = 0;
    for (auto& b : params.slot_span(slot)) {
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
