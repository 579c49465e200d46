// The causalqwen program's text form of a calibration report (eval/calibration.hpp): used by
// `eval` for the whole report and by `demo` for its coverage line. A statistic that is undefined
// on the data (no targets, a zero denominator) prints as "-".
#pragma once
#include <causalqwen/eval/calibration.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>

namespace cqcli {

/// "-" for a missing value, else the value in `spec` (a fmt format such as "{:.4g}").
inline std::string or_dash(std::optional<double> value, const char* spec = "{:.4g}") {
  return value ? fmt::format(fmt::runtime(spec), *value) : std::string("-");
}

/// The coverage of the central interval at `nominal` (one of eval::coverage_levels), if reported.
inline const causalqwen::eval::IntervalCoverage* interval_at(const causalqwen::eval::NumberCalibrationReport& r,
                                                              double nominal) {
  for (const auto& interval : r.intervals)
    if (interval.nominal == nominal) return &interval;
  return nullptr;
}

/// "coverage of the 90% intervals 0.873 (nominal 0.90 ± 0.012), over-confident; median width 3.21".
inline std::string coverage_line(const causalqwen::eval::NumberCalibrationReport& r, double nominal = 0.9) {
  const auto* interval = interval_at(r, nominal);
  if (!interval || !interval->coverage) return fmt::format("coverage of the {:.0f}% intervals: no targets", 100 * nominal);
  return fmt::format("coverage of the {:.0f}% intervals loc_Y ± scale_Y·tan(π·p/2) {:.3f} (nominal {:.2f} ± {:.3f}), {}; "
                     "median width {}",
                     100 * nominal, *interval->coverage, nominal, 2 * interval->standard_error.value_or(0),
                     interval->verdict ? causalqwen::eval::verdict_name(*interval->verdict) : "-",
                     or_dash(interval->median_width));
}

/// The number statistics: errors (and the baseline's), NLL, the coverage table, the PIT histogram.
inline void print_number_calibration(std::FILE* out, const causalqwen::eval::NumberCalibrationReport& r,
                                     const std::string& indent = "  ") {
  fmt::print(out, "{}numbers: {} <NUM> targets\n", indent, r.numbers);
  if (r.numbers == 0) return;
  const bool point = !causalqwen::model::has_scale(r.head);
  if (point)
    fmt::print(out, "{}  MAE of loc_Y {}, median |error| {} (a point head: no NLL, interval or PIT)\n", indent, or_dash(r.mae),
               or_dash(r.median_abs_error));
  else
    fmt::print(out, "{}  MAE of loc_Y {}, median |error| {}, mean {} NLL {}\n", indent, or_dash(r.mae),
               or_dash(r.median_abs_error), r.head == causalqwen::model::RegHead::gaussian ? "Gaussian" : "Cauchy",
               or_dash(r.mean_nll));
  if (r.baseline)
    fmt::print(out, "{}  baseline: always {:.6g} has MAE {}, median |error| {}; the model's are {}x and {}x of it\n",
               indent, r.baseline->value, or_dash(r.baseline->mae), or_dash(r.baseline->median_abs_error),
               or_dash(r.baseline->mae_ratio, "{:.3f}"), or_dash(r.baseline->median_abs_error_ratio, "{:.3f}"));
  if (point) return;
  fmt::print(out, "{}  central interval  coverage  ± 2 s.e.  median width  verdict\n", indent);
  for (const auto& interval : r.intervals)
    fmt::print(out, "{}  {:>14.0f}%  {:>8}  {:>8}  {:>12}  {}\n", indent, 100 * interval.nominal,
               or_dash(interval.coverage, "{:.3f}"),
               interval.standard_error ? fmt::format("{:.3f}", 2 * *interval.standard_error) : std::string("-"),
               or_dash(interval.median_width), interval.verdict ? causalqwen::eval::verdict_name(*interval.verdict) : "-");
  std::string bins;
  for (auto count : r.pit_counts) bins += fmt::format(" {}", count);
  fmt::print(out, "{}  PIT F_Y(y) in 10 bins (flat when calibrated; a U shape: over-confident):{}; chi-square {} (9 d.o.f.)\n",
             indent, bins, or_dash(r.pit_chi_square, "{:.1f}"));
}

/// The next-token statistics: accuracy, <NUM> precision/recall/F1, Σ_k P_k, reliability and ECE.
inline void print_token_calibration(std::FILE* out, const causalqwen::eval::TokenCalibrationReport& r,
                                    const std::string& indent = "  ") {
  fmt::print(out, "{}tokens: {} positions with a label\n", indent, r.positions);
  if (r.positions == 0) return;
  fmt::print(out, "{}  next-token accuracy {}; <NUM> precision {}, recall {}, F1 {}; mean Σ_k P_k {}\n", indent,
             or_dash(r.accuracy, "{:.4f}"), or_dash(r.num_precision, "{:.4f}"), or_dash(r.num_recall, "{:.4f}"),
             or_dash(r.num_f1, "{:.4f}"), or_dash(r.mean_prob_sum, "{:.4f}"));
  fmt::print(out, "{}  reliability of max_k P_k: expected calibration error {}\n", indent, or_dash(r.ece, "{:.4f}"));
  fmt::print(out, "{}    confidence bin  positions  mean confidence  hit rate\n", indent);
  for (const auto& bin : r.reliability)
    if (bin.count > 0)
      fmt::print(out, "{}    [{:.1f}, {:.1f}{}  {:>9}  {:>15}  {:>8}\n", indent, bin.lower, bin.upper, bin.upper >= 1 ? "]" : ")",
                 bin.count, or_dash(bin.mean_confidence, "{:.3f}"), or_dash(bin.accuracy, "{:.3f}"));
}

}  // namespace cqcli
