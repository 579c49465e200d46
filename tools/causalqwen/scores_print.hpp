// The causalqwen program's text form of the proper scores of number forecasts
// (eval/number_scores.hpp), of a recalibration's effect on the intervals, and the picture of the
// risk–coverage curve (eval/risk_coverage.hpp). A statistic undefined on the data prints as "-".
#pragma once
#include "calibration_print.hpp"
#include "svg_plot.hpp"

#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/eval/number_scores.hpp>
#include <causalqwen/eval/risk_coverage.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace cqcli {

/// The LevelScores of `level` in `s`, if scored.
inline const causalqwen::eval::LevelScores* level_scores(const causalqwen::eval::ProperScores& s, double level) {
  for (const auto& l : s.levels)
    if (l.level == level) return &l;
  return nullptr;
}

/// One row of the scores table: numbers, NLL, CRPS mean/median/trimmed, pinball, IS at 50 and
/// 90 %, MAE and RMSE of the location, the skill of the median CRPS (a point forecast has no NLL
/// and no interval: "-").
inline void print_scores_row(std::FILE* out, const std::string& name, const causalqwen::eval::ProperScores& s) {
  const auto* l50 = level_scores(s, 0.5);
  const auto* l90 = level_scores(s, 0.9);
  fmt::print(out, "  {:<20} {:>7} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9}\n", name, s.numbers,
             or_dash(s.nll.mean), or_dash(s.crps.mean), or_dash(s.crps.median), or_dash(s.crps.trimmed_mean),
             or_dash(s.mean_pinball), or_dash(l50 ? l50->interval_score : std::nullopt),
             or_dash(l90 ? l90->interval_score : std::nullopt), or_dash(s.mae), or_dash(s.rmse),
             or_dash(s.crps_median_skill, "{:.3f}"));
}

/// The proper scores overall and per group, and the skills against the baseline.
inline void print_proper_scores(std::FILE* out, const causalqwen::eval::GroupedProperScores& g,
                                std::optional<double> baseline, const std::string& baseline_source) {
  fmt::print(out, "proper scores of the number forecasts, read as {} (lower is better; NLL first):\n",
             causalqwen::eval::family_name(g.overall.family));
  fmt::print(out, "  {:<20} {:>7} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9}\n", "", "numbers", "NLL",
             "CRPS mean", "median", "trimmed", "pinball", "IS 50%", "IS 90%", "MAE", "RMSE", "skill*");
  print_scores_row(out, "overall", g.overall);
  for (const auto& [name, s] : g.groups) print_scores_row(out, name, s);
  const auto& s = g.overall;
  if (baseline) {
    fmt::print(out, "  skill = 1 − score/baseline's against always predicting {:.6g} ({}): CRPS mean {}, CRPS median {}, "
                    "pinball {}, MAE {}",
               *baseline, baseline_source, or_dash(s.crps_skill, "{:.3f}"), or_dash(s.crps_median_skill, "{:.3f}"),
               or_dash(s.pinball_skill, "{:.3f}"), or_dash(s.mae_skill, "{:.3f}"));
    for (const auto& l : s.levels) fmt::print(out, ", IS {:.0f}% {}", 100 * l.level, or_dash(l.skill, "{:.3f}"));
    fmt::print(out, "\n");
  }
  fmt::print(out, "  (CRPS trimmed: the mean of the middle {:.0f}%; pinball: mean over τ = 0.05…0.95; IS: interval score "
                  "of the central interval; skill*: of the median CRPS)\n",
             100 * (1 - 2 * causalqwen::eval::trimmed_fraction));
}

/// Coverage, median width and interval score of each level before and after the recalibration.
inline void print_recalibration(std::FILE* out, const causalqwen::eval::GroupedProperScores& before,
                                const causalqwen::eval::GroupedProperScores& after,
                                const causalqwen::eval::IntervalCalibration& c, const std::string& file) {
  fmt::print(out, "recalibrated intervals ({} {}, fitted on {} numbers{}):\n", causalqwen::eval::method_name(c.method),
             file, c.pooled.numbers, c.groups.empty() ? "" : fmt::format(", {} groups with their own", c.groups.size()));
  fmt::print(out, "  {:>6}  {:>10}  {:>17}  {:>21}  {:>23}\n", "level", "multiplier", "coverage", "median width",
             "interval score");
  for (const auto& l : after.overall.levels) {
    const auto* b = level_scores(before.overall, l.level);
    fmt::print(out, "  {:>5.0f}%  {:>10.4g}  {:>7} -> {:>6}  {:>9} -> {:>9}  {:>10} -> {:>10}\n", 100 * l.level,
               c.multiplier(l.level), or_dash(b ? b->coverage : std::nullopt, "{:.3f}"), or_dash(l.coverage, "{:.3f}"),
               or_dash(b ? b->median_width : std::nullopt), or_dash(l.median_width),
               or_dash(b ? b->interval_score : std::nullopt), or_dash(l.interval_score));
  }
}

/// PLOT.svg → PLOT-risk-coverage.svg, beside it.
inline std::filesystem::path risk_coverage_plot_path(const std::filesystem::path& plot) {
  auto name = plot.stem().string() + "-risk-coverage.svg";
  return plot.parent_path() / name;
}

/// The risk–coverage curve as two panels against the share of numbers kept: the MAE of the kept
/// numbers, and the coverage of their intervals with the nominal level.
inline void write_risk_coverage_svg(const std::filesystem::path& path, const std::vector<causalqwen::eval::RiskCoveragePoint>& curve,
                                    double level) {
  SvgSeries mae, coverage;
  mae.label = "MAE of the kept numbers";
  mae.color = "#1f4e9c";
  coverage.label = fmt::format("coverage of their {:.0f}% intervals", 100 * level);
  coverage.color = "#d95f02";
  for (const auto& p : curve) {
    mae.x.push_back(p.kept_fraction), mae.y.push_back(p.mae);
    coverage.x.push_back(p.kept_fraction), coverage.y.push_back(p.coverage);
  }
  SvgPanel risk, cover;
  risk.title = "risk: MAE as the widest intervals are set aside";
  risk.y_label = "MAE";
  risk.series = {mae};
  cover.title = "coverage of the kept numbers' intervals";
  cover.y_label = "coverage";
  cover.series = {coverage};
  SvgReference nominal;
  nominal.label = fmt::format("nominal {:.2f}", level);
  nominal.y = level;
  cover.references = {nominal};
  write_svg(path, {risk, cover},
            fmt::format("selective prediction: numbers kept narrowest {:.0f}% interval first", 100 * level),
            "share of numbers kept");
}

}  // namespace cqcli
