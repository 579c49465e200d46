// The teacher-forced forecasts of the numbers of a JSONL file, as `eval` and `calibrate` score
// them: one eval::NumberForecast (y, loc_Y, scale_Y) per <NUM> target, with its sequence (the
// line of the file), its group and P(<NUM>), gathered from train::evaluate's callback. A
// forecast that is not finite with scale > 0 (a diverged model) is left out and counted.
#pragma once
#include "command.hpp"

#include <causalqwen/eval/forecast.hpp>
#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/train/evaluate.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace cqcli {

/// The forecasts of the numbers, in batch, row, position order.
struct NumberForecasts {
  std::vector<causalqwen::eval::NumberForecast> forecasts;
  std::vector<std::size_t> sequence;   // the index of the line the number is in
  std::vector<std::string> group;      // its group (empty when the file has no groups)
  std::vector<double> p_num;           // P(<NUM>) where it is predicted
  std::size_t left_out = 0;            // forecasts not finite

  /// The callback of train::evaluate for padded batches of `batch_size` texts (sequence
  /// = batch·batch_size + row) of a file whose groups are `groups` (empty: none).
  causalqwen::train::NumberCallback collector(std::size_t batch_size, const std::vector<std::string>& groups) {
    return [this, batch_size, &groups](const causalqwen::train::NumberPrediction& p) {
      if (!(std::isfinite(p.target) && std::isfinite(p.loc) && p.scale > 0 && std::isfinite(p.scale))) {
        ++left_out;
        return;
      }
      const std::size_t s = p.batch * batch_size + p.row;
      forecasts.push_back({p.target, p.loc, p.scale});
      sequence.push_back(s);
      if (!groups.empty()) group.push_back(s < groups.size() ? groups[s] : std::string());
      p_num.push_back(p.p_num);
    };
  }
};

/// --levels: each in (0, 1) and finite, given in increasing order without repeats; throws
/// CLI::ValidationError naming the option otherwise.
inline void check_levels(const std::vector<double>& levels, const char* option = "--levels") {
  if (levels.empty()) throw CLI::ValidationError(option, "needs at least one level in (0, 1)");
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (!(levels[i] > 0 && levels[i] < 1))
      throw CLI::ValidationError(option, fmt::format("each level must lie in (0, 1), got {}", levels[i]));
    if (i > 0 && !(levels[i] > levels[i - 1]))
      throw CLI::ValidationError(option, fmt::format("levels must increase, got {} after {}", levels[i], levels[i - 1]));
  }
}

}  // namespace cqcli
