/// Selective prediction: how good the numbers a model is sure of are. The numbers are ordered by
/// the width of their central interval at one level (narrowest first, ties in their given order);
/// keeping the k narrowest, for k = ⌈n·j/steps⌉, j = 1…steps,
///   kept_fraction = k/n                      (the share of numbers answered)
///   max_width     = the k-th width            (the --max-width that keeps them)
///   mae           = mean |y − loc| over them  (the risk)
///   coverage      = #{y ∈ interval}/k over them
/// A model whose widths carry information has an MAE that falls as fewer numbers are kept.
#pragma once
#include "causalqwen/eval/forecast.hpp"
#include "causalqwen/eval/interval_calibration.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

namespace causalqwen::eval {

/// One point of the risk–coverage curve.
struct RiskCoveragePoint {
  std::size_t kept = 0;
  double kept_fraction = 0, max_width = 0, mae = 0, coverage = 0;
};

/// The curve (see the file comment) for the central intervals at `level` (recalibrated by
/// `calibration` when given, each number with its group `group_of_number[i]` when that is not
/// empty). Empty for no forecasts or a point family.
inline std::vector<RiskCoveragePoint> risk_coverage_curve(const std::vector<NumberForecast>& forecasts, double level,
                                                          ForecastFamily family = ForecastFamily::cauchy,
                                                          const IntervalCalibration* calibration = nullptr,
                                                          const std::vector<std::string>& group_of_number = {},
                                                          std::size_t steps = 20) {
  std::vector<RiskCoveragePoint> curve;
  const std::size_t n = forecasts.size();
  if (n == 0 || family == ForecastFamily::point || steps == 0) return curve;
  std::vector<Interval> intervals;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& f = forecasts[i];
    intervals.push_back(central_interval(f.loc, f.scale, level, calibration,
                                         group_of_number.empty() ? nullptr : &group_of_number[i], family));
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return intervals[a].width() < intervals[b].width(); });
  double abs_error = 0;
  std::size_t inside = 0, next = 1;
  for (std::size_t k = 1; k <= n; ++k) {
    const auto i = order[k - 1];
    abs_error += std::fabs(forecasts[i].y - forecasts[i].loc);
    inside += intervals[i].contains(forecasts[i].y);
    const auto target = static_cast<std::size_t>(std::ceil(static_cast<double>(n) * static_cast<double>(next) / static_cast<double>(steps)));
    if (k < target) continue;
    while (next <= steps &&
           static_cast<std::size_t>(std::ceil(static_cast<double>(n) * static_cast<double>(next) / static_cast<double>(steps))) <= k)
      ++next;
    const double count = static_cast<double>(k);
    curve.push_back({k, count / static_cast<double>(n), intervals[i].width(), abs_error / count, static_cast<double>(inside) / count});
  }
  return curve;
}

/// The curve as JSON: [{"kept", "kept_fraction", "max_width", "mae", "coverage"}, …].
inline nlohmann::json risk_coverage_to_json(const std::vector<RiskCoveragePoint>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : curve)
    out.push_back({{"kept", p.kept}, {"kept_fraction", p.kept_fraction}, {"max_width", p.max_width}, {"mae", p.mae},
                   {"coverage", p.coverage}});
  return out;
}

}  // namespace causalqwen::eval
