// The teacher-forced forecasts of the numbers of a JSONL file, as `eval` and `calibrate` score
// them: one eval::NumberForecast (y, loc_Y, scale_Y) per <NUM> target, with its sequence (the
// line of the file), its group and P(<NUM>), gathered from train::evaluate's callback. A
// forecast that is not finite with scale > 0 (a diverged model) is left out and counted.
// The forecasts are read as the model's regression head says (config.json reg_head): a
// Cauchy, a Gaussian, or a point (mse).
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

/// The forecast family of a model's regression head: cauchy, gaussian, or point for mse.
inline causalqwen::eval::ForecastFamily forecast_family(const causalqwen::model::CausalConfig& c) {
  switch (c.reg_head) {
    case causalqwen::model::RegHead::gaussian: return causalqwen::eval::ForecastFamily::gaussian;
    case causalqwen::model::RegHead::mse: return causalqwen::eval::ForecastFamily::point;
    case causalqwen::model::RegHead::cauchy: break;
  }
  return causalqwen::eval::ForecastFamily::cauchy;
}

/// FormatError naming DIR/config.json when the model's head forecasts a point (reg_head mse):
/// `what` needs an interval.
inline void require_interval_head(const causalqwen::model::CausalConfig& c, const std::string& model_dir, const std::string& what) {
  if (causalqwen::model::has_scale(c.reg_head)) return;
  throw causalqwen::FormatError(fmt::format("{}/config.json: field 'reg_head' is \"mse\": the model predicts each number as a "
                                            "point, with no scale and no interval, so {} is refused",
                                            model_dir, what));
}

/// FormatError unless the calibration's distribution is the model's head's (a calibration.json
/// fitted for another reading of the scale would print wrong intervals).
inline void require_calibration_family(const causalqwen::eval::IntervalCalibration& calibration,
                                       const causalqwen::model::CausalConfig& c, const std::string& model_dir) {
  if (calibration.distribution == forecast_family(c)) return;
  throw causalqwen::FormatError(fmt::format("{}/{}: field 'distribution' is \"{}\" but the model's regression head is \"{}\" "
                                            "(config.json reg_head): run calibrate again, or give --no-calibration",
                                            model_dir, causalqwen::eval::calibration_file_name,
                                            causalqwen::eval::family_name(calibration.distribution),
                                            causalqwen::model::reg_head_name(c.reg_head)));
}

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
