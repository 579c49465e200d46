/// Schedules indexed by the optimiser step s = 0, 1, … (the step about to be taken).
///
///   LrSchedule      constant:       lr(s) = peak·min(1, (s+1)/W)           (W = warm-up steps, 0: none)
///                   warmup_cosine:  lr(s) = peak·(s+1)/W for s < W, then
///                                   lr(s) = min + (peak − min)·½(1 + cos(π·p)),  p = (s − W)/max(1, N − W)
///                                   (N = total steps, min = peak·min_ratio; p is capped at 1)
///   AnnealSchedule  a value annealed from start to end, used for the regression gate's α (the gated
///                   loss is (α + (1 − α)·P(<NUM>))·nll: a large α gives the regression a floor of
///                   gradient while P(<NUM>) is still small, then anneals to full gating) and for λ,
///                   the regression loss's weight (a large λ first feeds a starved regression):
///                   v(s) = end + (start − end)·f(min(1, s/A)),  f(q) = 1 − q (linear) or ½(1 + cos(πq)) (cosine);
///                   A = anneal steps; A = 0 means v = start throughout.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string_view>

namespace causalqwen::optim {

enum class LrShape { constant, warmup_cosine };

struct LrSchedule {
  LrShape shape = LrShape::constant;
  double peak = 1e-3;
  std::size_t warmup = 0;
  std::size_t total = 1;
  double min_ratio = 0.1;

  /// The learning rate of step s (see the file comment).
  double at(std::size_t s) const {
    if (warmup > 0 && s < warmup) return peak * static_cast<double>(s + 1) / static_cast<double>(warmup);
    if (shape == LrShape::constant) return peak;
    const double span = static_cast<double>(std::max<std::size_t>(1, total > warmup ? total - warmup : 0));
    const double p = std::min(1.0, static_cast<double>(s - warmup) / span);
    const double lo = peak * min_ratio;
    return lo + (peak - lo) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  }
};

/// "constant" or "cosine" (linear warm-up then cosine); false for anything else.
inline bool parse_lr_shape(std::string_view text, LrShape& out) {
  if (text == "constant") out = LrShape::constant;
  else if (text == "cosine") out = LrShape::warmup_cosine;
  else return false;
  return true;
}

enum class AnnealShape { linear, cosine };

struct AnnealSchedule {
  double start = 0.0;
  double end = 0.0;
  std::size_t anneal_steps = 0;
  AnnealShape shape = AnnealShape::linear;

  /// The value of step s (see the file comment); always in [min(start,end), max(start,end)].
  double at(std::size_t s) const {
    if (anneal_steps == 0) return start;
    const double q = std::min(1.0, static_cast<double>(s) / static_cast<double>(anneal_steps));
    const double f = shape == AnnealShape::linear ? 1.0 - q : 0.5 * (1.0 + std::cos(std::numbers::pi * q));
    return end + (start - end) * f;
  }
};

/// The regression gate's α over the steps.
using AlphaSchedule = AnnealSchedule;

}  // namespace causalqwen::optim
