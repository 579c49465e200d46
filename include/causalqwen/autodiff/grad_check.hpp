/// `grad_check`: compares an analytic gradient with central differences in double.
///   numeric_i = (L(x + h·e_i) − L(x − h·e_i)) / (2h)
///   error_i   = |analytic_i − numeric_i| / max(|analytic_i|, |numeric_i|, floor)
/// and passes when every error_i ≤ rtol. The floor keeps near-zero entries from failing on
/// round-off: with h = 1e-5 the truncation error is ~h²·|L'''|/6 and the round-off
/// ~ε·|L|/h ≈ 1e-11·|L|, far below rtol·floor = 1e-8 for |L| = O(1).
/// Public so that users can check their own layers: perturb a double buffer in place, give
/// the analytic gradient and a callable recomputing the loss from the buffer.
#pragma once
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

namespace causalqwen::autodiff {

struct GradCheckOptions {
  double step = 1e-5;   // h of the central difference
  double rtol = 1e-5;   // tolerated relative error
  double floor = 1e-3;  // denominators below this are raised to it
  std::size_t max_coordinates = 0;  // 0: check every coordinate; else an evenly spaced subset
};

struct GradCheckResult {
  bool ok = true;
  std::size_t checked = 0;      // coordinates compared
  double max_error = 0;         // the largest error_i
  std::size_t worst_index = 0;  // where it occurred
  double worst_analytic = 0, worst_numeric = 0;
  std::string message() const {
    return fmt::format("grad_check {}: {} coordinates, max relative error {:.3e} at {} "
                       "(analytic {:.10g}, numeric {:.10g})",
                       ok ? "passed" : "FAILED", checked, max_error, worst_index, worst_analytic,
                       worst_numeric);
  }
};

/// Central-difference check of `analytic` = ∂loss/∂x. `loss()` must read `x` (which this
/// function perturbs and restores) and return the loss as a double.
template <class Loss>
GradCheckResult grad_check(std::span<double> x, std::span<const double> analytic, Loss&& loss,
                           const GradCheckOptions& options = {}) {
  detail::require(x.size() == analytic.size(), "grad_check",
                  "x has {} entries but the analytic gradient {}", x.size(), analytic.size());
  detail::require(options.step > 0 && options.rtol > 0 && options.floor > 0, "grad_check",
                  "step, rtol and floor must be > 0");
  GradCheckResult result;
  const std::size_t n = x.size();
  const std::size_t stride =
      options.max_coordinates == 0 || n <= options.max_coordinates
          ? 1
          : (n + options.max_coordinates - 1) / options.max_coordinates;
  for (std::size_t i = 0; i < n; i += stride) {
    const double saved = x[i];
    x[i] = saved + options.step;
    const double up = static_cast<double>(loss());
    x[i] = saved - options.step;
    const double down = static_cast<double>(loss());
    x[i] = saved;
    const double numeric = (up - down) / (2 * options.step);
    const double a = analytic[i];
    const double denom = std::max({std::abs(a), std::abs(numeric), options.floor});
    const double error = std::isfinite(a) && std::isfinite(numeric)
                             ? std::abs(a - numeric) / denom
                             : INFINITY;
    ++result.checked;
    if (result.checked == 1 || !(error <= result.max_error)) {  // NaN counts as worst
      result.max_error = error;
      result.worst_index = i;
      result.worst_analytic = a;
      result.worst_numeric = numeric;
    }
  }
  result.ok = result.max_error <= options.rtol;
  return result;
}

}  // namespace causalqwen::autodiff
