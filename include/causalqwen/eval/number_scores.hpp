/// The proper scores of a set of number forecasts (eval/scores.hpp), overall and per group, for
/// a report: for n numbers with forecasts F_i of one family and observed y_i,
///   nll           mean, median and trimmed mean of −log f_i(y_i)            (none for point)
///   crps          mean, median and trimmed mean of CRPS(F_i, y_i)
///   mean_pinball  mean over i of the mean over τ ∈ {0.05, …, 0.95} of ρ_τ(y_i − q_τ,i)
///   mae, rmse     of the location: mean |y_i − loc_i|, √(mean (y_i − loc_i)²)
///   per level p   coverage #{y_i ∈ I_i}/n, mean and median width, and the mean interval score
///                 IS_{1−p} of the central interval I_i = loc_i ± m_p·scale_i·w(p)
///                 (m_p from an IntervalCalibration, 1 without one)                (none for point)
/// and against a baseline point forecast c (the median of the training targets, or of the
/// scored ones): its CRPS |y − c| (mean, median), its mean pinball loss, its MAE, its interval
/// score (a zero-width interval at c: (2/α)·|y − c|), and the skill 1 − score/score_baseline of
/// the CRPS (mean and median), the pinball loss, the MAE and each level's interval score.
/// A statistic undefined on the data (no number, a zero baseline score) is nullopt, null in JSON.
#pragma once
#include "causalqwen/eval/aggregate.hpp"
#include "causalqwen/eval/forecast.hpp"
#include "causalqwen/eval/interval_calibration.hpp"
#include "causalqwen/eval/scores.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace causalqwen::eval {

/// The central interval of one level over a set of numbers.
struct LevelScores {
  double level = 0;                                  // p
  std::optional<double> coverage;                    // #{y ∈ I}/n
  std::optional<double> mean_width, median_width;    // of u − l
  std::optional<double> interval_score;              // mean IS_{1−p}
  std::optional<double> baseline_interval_score;     // mean (2/(1−p))·|y − c|
  std::optional<double> skill;                       // 1 − interval_score / baseline_interval_score
};

/// The scores of one set of numbers (see the file comment).
struct ProperScores {
  ForecastFamily family = ForecastFamily::cauchy;
  bool calibrated = false;               // the intervals used an IntervalCalibration
  std::size_t numbers = 0;
  ScoreSummary nll, crps;
  std::optional<double> mean_pinball, mae, rmse;
  std::vector<LevelScores> levels;
  std::optional<double> baseline_value;  // c
  ScoreSummary baseline_crps;            // of |y − c|
  std::optional<double> baseline_pinball, baseline_mae;
  std::optional<double> crps_skill, crps_median_skill, pinball_skill, mae_skill;
};

/// The scores of every number and of every group of numbers.
struct GroupedProperScores {
  ProperScores overall;
  std::map<std::string, ProperScores> groups;
};

/// The scores of `forecasts` (see the file comment) at `levels`; the intervals recalibrated by
/// `calibration` (for `group`, nullptr: pooled) when given; compared with the point forecast
/// `baseline` when given. The forecasts must be finite with scale > 0 (the caller leaves the
/// others out).
inline ProperScores score_forecasts(const std::vector<NumberForecast>& forecasts, ForecastFamily family,
                                    const std::vector<double>& levels, std::optional<double> baseline,
                                    const IntervalCalibration* calibration = nullptr, const std::string* group = nullptr) {
  ProperScores s;
  s.family = family;
  s.calibrated = calibration != nullptr;
  s.numbers = forecasts.size();
  s.baseline_value = baseline;
  const std::size_t n = forecasts.size();
  std::vector<double> nll, crps, base_crps;
  double pinball = 0, abs_error = 0, squared_error = 0, base_pinball = 0;
  for (const auto& f : forecasts) {
    switch (family) {
      case ForecastFamily::cauchy:
        nll.push_back(cauchy_nll(f.y, f.loc, f.scale));
        crps.push_back(cauchy_crps(f.y, f.loc, f.scale));
        pinball += cauchy_mean_pinball(f.y, f.loc, f.scale);
        break;
      case ForecastFamily::gaussian:
        nll.push_back(gaussian_nll(f.y, f.loc, f.scale));
        crps.push_back(gaussian_crps(f.y, f.loc, f.scale));
        pinball += gaussian_mean_pinball(f.y, f.loc, f.scale);
        break;
      case ForecastFamily::point:
        crps.push_back(point_crps(f.y, f.loc));
        pinball += point_mean_pinball(f.y, f.loc);
        break;
    }
    abs_error += std::fabs(f.y - f.loc);
    squared_error += (f.y - f.loc) * (f.y - f.loc);
    if (baseline) {
      base_crps.push_back(point_crps(f.y, *baseline));
      base_pinball += point_mean_pinball(f.y, *baseline);
    }
  }
  s.nll = summarize(nll);
  s.crps = summarize(crps);
  if (n > 0) {
    const double count = static_cast<double>(n);
    s.mean_pinball = pinball / count;
    s.mae = abs_error / count;
    s.rmse = std::sqrt(squared_error / count);
    if (baseline) {
      s.baseline_crps = summarize(base_crps);
      s.baseline_pinball = base_pinball / count;
      s.baseline_mae = s.baseline_crps.mean;
    }
  }
  s.crps_skill = skill_score(s.crps.mean, s.baseline_crps.mean);
  s.crps_median_skill = skill_score(s.crps.median, s.baseline_crps.median);
  s.pinball_skill = skill_score(s.mean_pinball, s.baseline_pinball);
  s.mae_skill = skill_score(s.mae, s.baseline_mae);
  if (family == ForecastFamily::point) return s;
  for (double p : levels) {
    LevelScores l;
    l.level = p;
    if (n > 0) {
      const double alpha = 1 - p;
      std::size_t inside = 0;
      std::vector<double> widths;
      double score = 0, base_score = 0;
      for (const auto& f : forecasts) {
        const auto interval = central_interval(f.loc, f.scale, p, calibration, group, family);
        inside += interval.contains(f.y);
        widths.push_back(interval.width());
        score += interval_score(interval.lower, interval.upper, f.y, alpha);
        if (baseline) base_score += interval_score(*baseline, *baseline, f.y, alpha);
      }
      const double count = static_cast<double>(n);
      l.coverage = static_cast<double>(inside) / count;
      l.mean_width = mean_of(widths);
      l.median_width = median_of(std::move(widths));
      l.interval_score = score / count;
      if (baseline) l.baseline_interval_score = base_score / count;
      l.skill = skill_score(l.interval_score, l.baseline_interval_score);
    }
    s.levels.push_back(l);
  }
  return s;
}

/// score_forecasts overall and for each group (`group_of_number[i]` the group of number i;
/// empty: overall only); with a calibration, each group's intervals use its own multipliers
/// (or the pooled ones), and the overall intervals each number's group's.
inline GroupedProperScores score_grouped(const std::vector<NumberForecast>& forecasts,
                                         const std::vector<std::string>& group_of_number, ForecastFamily family,
                                         const std::vector<double>& levels, std::optional<double> baseline,
                                         const IntervalCalibration* calibration = nullptr) {
  GroupedProperScores g;
  std::map<std::string, std::vector<NumberForecast>> by_group;
  for (std::size_t i = 0; i < group_of_number.size() && i < forecasts.size(); ++i)
    by_group[group_of_number[i]].push_back(forecasts[i]);
  for (const auto& [name, members] : by_group)
    g.groups.emplace(name, score_forecasts(members, family, levels, baseline, calibration, &name));
  g.overall = score_forecasts(forecasts, family, levels, baseline, calibration, nullptr);
  if (calibration && !calibration->groups.empty() && !by_group.empty()) {
    // Mondrian: the overall coverage, widths and interval scores from each number's own group
    for (std::size_t k = 0; k < g.overall.levels.size(); ++k) {
      auto& l = g.overall.levels[k];
      if (!l.coverage) continue;
      double inside = 0, score = 0;
      std::vector<double> widths;
      for (std::size_t i = 0; i < forecasts.size(); ++i) {
        const auto& f = forecasts[i];
        const auto interval = central_interval(f.loc, f.scale, l.level, calibration, &group_of_number[i], family);
        inside += interval.contains(f.y);
        widths.push_back(interval.width());
        score += interval_score(interval.lower, interval.upper, f.y, 1 - l.level);
      }
      const double count = static_cast<double>(forecasts.size());
      l.coverage = inside / count;
      l.mean_width = mean_of(widths);
      l.median_width = median_of(std::move(widths));
      l.interval_score = score / count;
      l.skill = skill_score(l.interval_score, l.baseline_interval_score);
    }
  }
  return g;
}

namespace detail_number_scores {

using Json = nlohmann::json;

inline Json number_or_null(std::optional<double> value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  return *value;
}

inline Json summary_json(const ScoreSummary& s) {
  return {{"mean", number_or_null(s.mean)}, {"median", number_or_null(s.median)}, {"trimmed_mean", number_or_null(s.trimmed_mean)}};
}

}  // namespace detail_number_scores

/// One set's scores as JSON: {"distribution", "calibrated", "numbers", "nll": {mean, median,
/// trimmed_mean}, "crps": {…}, "mean_pinball", "mae", "rmse", "levels": [{level, coverage,
/// mean_width, median_width, interval_score, baseline_interval_score, skill}], "baseline":
/// {value, crps: {…}, mean_pinball, mae} or null, "skill": {crps_mean, crps_median, pinball, mae}}.
inline nlohmann::json proper_scores_to_json(const ProperScores& s) {
  using namespace detail_number_scores;
  Json levels = Json::array();
  for (const auto& l : s.levels)
    levels.push_back({{"level", l.level},
                      {"coverage", number_or_null(l.coverage)},
                      {"mean_width", number_or_null(l.mean_width)},
                      {"median_width", number_or_null(l.median_width)},
                      {"interval_score", number_or_null(l.interval_score)},
                      {"baseline_interval_score", number_or_null(l.baseline_interval_score)},
                      {"skill", number_or_null(l.skill)}});
  Json baseline = nullptr;
  if (s.baseline_value)
    baseline = {{"value", *s.baseline_value},
                {"crps", summary_json(s.baseline_crps)},
                {"mean_pinball", number_or_null(s.baseline_pinball)},
                {"mae", number_or_null(s.baseline_mae)}};
  return {{"distribution", family_name(s.family)},
          {"calibrated", s.calibrated},
          {"numbers", s.numbers},
          {"nll", s.family == ForecastFamily::point ? Json(nullptr) : summary_json(s.nll)},
          {"crps", summary_json(s.crps)},
          {"mean_pinball", number_or_null(s.mean_pinball)},
          {"mae", number_or_null(s.mae)},
          {"rmse", number_or_null(s.rmse)},
          {"levels", levels},
          {"baseline", baseline},
          {"skill",
           {{"crps_mean", number_or_null(s.crps_skill)},
            {"crps_median", number_or_null(s.crps_median_skill)},
            {"pinball", number_or_null(s.pinball_skill)},
            {"mae", number_or_null(s.mae_skill)}}}};
}

/// {"overall": …, "groups": {name: …}} (proper_scores_to_json for each).
inline nlohmann::json grouped_scores_to_json(const GroupedProperScores& g) {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, s] : g.groups) groups[name] = proper_scores_to_json(s);
  return {{"overall", proper_scores_to_json(g.overall)}, {"groups", groups}};
}

}  // namespace causalqwen::eval
