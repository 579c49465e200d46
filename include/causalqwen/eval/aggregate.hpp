/// Summaries of a list of per-number scores and the skill of a score against a baseline's:
///   mean          = Σ s_i / n
///   median        = the middle value (the midpoint of the two middle ones for an even n)
///   trimmed mean  = the mean of the values left after the ⌊f·n⌋ smallest and the ⌊f·n⌋ largest
///                   are set aside (f = trimmed_fraction, 0.1 by default), robust to the few huge
///                   scores heavy-tailed errors give
///   skill         = 1 − score / score_baseline (1: perfect, 0: no better than the baseline,
///                   < 0: worse); undefined when the baseline's score is 0 or missing
/// An empty list has no summary (nullopt), so a report never holds NaN.
#pragma once
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <vector>

namespace causalqwen::eval {

/// The fraction set aside at each end by the trimmed mean.
inline constexpr double trimmed_fraction = 0.1;

/// Mean, median and trimmed mean of one score over a set of numbers.
struct ScoreSummary {
  std::optional<double> mean, median, trimmed_mean;
};

/// Σ s_i / n; nullopt when empty.
inline std::optional<double> mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

/// The median (the midpoint of the two middle values for an even count); nullopt when empty.
inline std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  if (values.size() % 2) return values[half];
  return std::midpoint(values[half - 1], values[half]);
}

/// The mean after the ⌊fraction·n⌋ smallest and largest values are set aside (fraction ∈ [0, ½));
/// nullopt when empty.
inline std::optional<double> trimmed_mean_of(std::vector<double> values, double fraction = trimmed_fraction) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const auto cut = static_cast<std::size_t>(fraction * static_cast<double>(values.size()));
  const auto first = values.begin() + static_cast<std::ptrdiff_t>(cut), last = values.end() - static_cast<std::ptrdiff_t>(cut);
  return std::accumulate(first, last, 0.0) / static_cast<double>(last - first);
}

/// Mean, median and trimmed mean of `values`.
inline ScoreSummary summarize(const std::vector<double>& values) {
  return {mean_of(values), median_of(values), trimmed_mean_of(values)};
}

/// 1 − score / baseline; nullopt when either is missing or the baseline is 0.
inline std::optional<double> skill_score(std::optional<double> score, std::optional<double> baseline) {
  if (!score || !baseline || *baseline == 0) return std::nullopt;
  return 1 - *score / *baseline;
}

}  // namespace causalqwen::eval
