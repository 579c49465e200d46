/// Calibration statistics of an evaluation: how good the Cauchy predictions of numbers are and
/// how honest their uncertainty is, and how the OvR class probabilities match the hit rates.
/// A model whose regression head is read as a Gaussian (reg_head gaussian) is judged by the same
/// statistics of N(loc, scale²): its NLL, intervals loc ± scale·Φ⁻¹(½ + p/2) and PIT Φ((y − loc)/scale);
/// a point head (reg_head mse) has errors only: no NLL, no interval, no PIT (null in JSON).
///
/// Numbers (one <NUM> target y with its prediction Y ~ Cauchy(loc, scale)):
///   mae = mean |loc − y|,  median_abs_error = median |loc − y|, the same for a constant baseline
///   prediction c (e.g. the median of the training targets) and the ratios model / baseline;
///   mean_nll = mean of log(π·scale) + log1p(((y − loc)/scale)²);
///   central interval at level p: loc ± scale·w_p with w_p = tan(π·p/2) (the quantile of ½ + p/2
///   of the standard Cauchy), coverage = #{|y − loc| ≤ scale·w_p} / n at p = 0.5, 0.8, 0.9, 0.95,
///   with the median width 2·w_p·scale and a verdict against the binomial standard error
///   se = √(p(1 − p)/n): "over-confident" when coverage < p − 2·se, "under-confident" when
///   coverage > p + 2·se, else "calibrated";
///   PIT u = F_Y(y) = ½ + atan((y − loc)/scale)/π counted in 10 equal bins of [0, 1] (uniform
///   for a calibrated model), with the chi-square statistic Σ_b (count_b − n/10)² / (n/10).
///
/// Tokens (every position with a label; the prediction is argmax_k P_k, its confidence max_k P_k):
///   accuracy = #{argmax = label} / N; <NUM> precision, recall and F1 of "argmax = <NUM>" against
///   "label = <NUM>"; mean Σ_k P_k; a reliability table of 10 equal confidence bins with their
///   counts, mean confidence and hit rate, and ECE = Σ_b (n_b/N)·|accuracy_b − confidence_b|.
///
/// A statistic that is undefined on the data (a mean over no targets, a ratio with a zero
/// denominator) is std::nullopt, and null in JSON: a report never holds NaN.
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/model/regression_head.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::eval {

/// The nominal levels p of the central intervals whose coverage a report holds.
inline constexpr std::array<double, 4> coverage_levels{0.5, 0.8, 0.9, 0.95};
/// Equal bins of [0, 1] of the PIT histogram and of the reliability table.
inline constexpr std::size_t pit_bin_count = 10;
inline constexpr std::size_t reliability_bin_count = 10;
/// The "format" field of a calibration report's JSON.
inline constexpr const char* calibration_format = "causalqwen-calibration-1";

/// What the coverage of one level says about the predicted scales.
enum class CoverageVerdict { calibrated, over_confident, under_confident };

/// "calibrated", "over-confident" or "under-confident".
inline std::string_view verdict_name(CoverageVerdict verdict) {
  switch (verdict) {
    case CoverageVerdict::over_confident: return "over-confident";
    case CoverageVerdict::under_confident: return "under-confident";
    case CoverageVerdict::calibrated: break;
  }
  return "calibrated";
}

/// The verdict named `name` (verdict_name's inverse); FormatError naming `source` otherwise.
inline CoverageVerdict verdict_from_name(std::string_view name, std::string_view source) {
  for (auto v : {CoverageVerdict::calibrated, CoverageVerdict::over_confident, CoverageVerdict::under_confident})
    if (verdict_name(v) == name) return v;
  throw FormatError(fmt::format("{}: verdict must be \"calibrated\", \"over-confident\" or \"under-confident\", got \"{}\"",
                                source, name));
}

/// verdict = over-confident if coverage < p − 2·se, under-confident if coverage > p + 2·se, else
/// calibrated, with se = √(p(1 − p)/n) the standard error of a binomial proportion.
/// DomainError when n = 0.
inline CoverageVerdict coverage_verdict(double coverage, double nominal, std::size_t n) {
  detail::require(n > 0, "coverage_verdict", "needs at least one target");
  const double standard_error = std::sqrt(nominal * (1 - nominal) / static_cast<double>(n));
  if (coverage < nominal - 2 * standard_error) return CoverageVerdict::over_confident;
  if (coverage > nominal + 2 * standard_error) return CoverageVerdict::under_confident;
  return CoverageVerdict::calibrated;
}

/// w_p = tan(π·p/2), the half-width of the central interval of level p of the standard Cauchy,
/// as its quantile of ½ + p/2 (evaluated without cancellation near p = 1).
inline double interval_half_width(double nominal) { return raw::standard_quantile(0.5 + 0.5 * nominal); }

/// The half-width in units of the scale of `head`'s central interval of level p: tan(π·p/2) for
/// cauchy, Φ⁻¹(½ + p/2) for gaussian, 0 for mse (a point has no interval).
inline double interval_half_width(double nominal, model::RegHead head) {
  switch (head) {
    case model::RegHead::gaussian: return model::normal_quantile(0.5 + 0.5 * nominal);
    case model::RegHead::mse: return 0;
    case model::RegHead::cauchy: break;
  }
  return interval_half_width(nominal);
}

namespace detail_calibration {

/// median = the middle value of `values`, or the midpoint of the two middle ones; nullopt when
/// empty. Reorders `values`.
inline std::optional<double> median_of(std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  const std::size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  const double upper = values[half];
  if (values.size() % 2) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half));
  return std::midpoint(lower, upper);
}

/// numerator / denominator, or nullopt when either is missing or the denominator is 0.
inline std::optional<double> ratio_of(std::optional<double> numerator, std::optional<double> denominator) {
  if (!numerator || !denominator || *denominator == 0) return std::nullopt;
  return *numerator / *denominator;
}

/// total / count (a mean, or a rate of a count), or nullopt when count = 0.
inline std::optional<double> per_count(double total, std::size_t count) {
  if (count == 0) return std::nullopt;
  return total / static_cast<double>(count);
}

}  // namespace detail_calibration

/// The median of `values` (the midpoint of the two middle ones for an even count); nullopt when
/// empty.
inline std::optional<double> median(std::vector<double> values) { return detail_calibration::median_of(values); }

// ------------------------------------------------------------------ the reports

/// The coverage of the central interval loc ± scale·tan(π·p/2) at one nominal level p.
struct IntervalCoverage {
  double nominal = 0;                     // p
  std::size_t inside = 0;                 // #{|y − loc| ≤ scale·tan(π·p/2)}
  std::optional<double> coverage;         // inside / n
  std::optional<double> standard_error;   // √(p(1 − p)/n)
  std::optional<double> median_width;     // median of 2·scale·tan(π·p/2) = 2·tan(π·p/2)·median scale
  std::optional<CoverageVerdict> verdict;
};

/// The errors of a constant prediction c of every target, and the model's against them.
struct BaselineComparison {
  double value = 0;                               // c
  std::optional<double> mae;                      // mean |c − y|
  std::optional<double> median_abs_error;         // median |c − y|
  std::optional<double> mae_ratio;                // model mae / baseline mae
  std::optional<double> median_abs_error_ratio;   // model median / baseline median
};

/// The statistics of the <NUM> targets (see the file comment).
struct NumberCalibrationReport {
  model::RegHead head = model::RegHead::cauchy;  // the reading of the forecasts ("distribution" in JSON)
  std::size_t numbers = 0;
  std::optional<double> mae, median_abs_error, mean_nll;
  std::optional<BaselineComparison> baseline;  // present when a baseline value was given
  std::array<IntervalCoverage, coverage_levels.size()> intervals{};
  std::array<std::size_t, pit_bin_count> pit_counts{};
  std::optional<double> pit_chi_square;        // Σ_b (count_b − n/10)² / (n/10)
};

/// One bin [lower, upper) of the reliability table (the last bin includes 1).
struct ReliabilityBin {
  double lower = 0, upper = 0;
  std::size_t count = 0, hits = 0;          // positions whose confidence falls here; of them argmax = label
  std::optional<double> mean_confidence;    // mean max_k P_k in the bin
  std::optional<double> accuracy;           // hits / count
};

/// The statistics of the next-token predictions at the positions with a label.
struct TokenCalibrationReport {
  std::size_t positions = 0, correct = 0;      // positions with a label; of them argmax = label
  std::optional<double> accuracy;
  std::size_t num_true_positives = 0;          // argmax = <NUM> and label = <NUM>
  std::size_t num_predicted = 0;               // argmax = <NUM>
  std::size_t num_labels = 0;                  // label = <NUM>
  std::optional<double> num_precision, num_recall, num_f1;
  std::optional<double> mean_prob_sum;         // mean Σ_k P_k
  std::array<ReliabilityBin, reliability_bin_count> reliability{};
  std::optional<double> ece;                   // Σ_b (n_b/N)·|accuracy_b − confidence_b|
};

/// The number and token statistics of one set of positions.
struct CalibrationStatistics {
  NumberCalibrationReport numbers;
  TokenCalibrationReport tokens;
};

/// The statistics of a whole evaluation and, when sequences were grouped, of every group.
struct CalibrationReport {
  CalibrationStatistics overall;
  std::map<std::string, CalibrationStatistics> groups;
};

// ------------------------------------------------------------------ the accumulators

/// Collects <NUM> targets y with their predictions Cauchy(loc, scale) and reports their
/// statistics (see the file comment). Keeps one absolute error and one scale per target (the
/// medians need them).
class NumberCalibration {
 public:
  /// `baseline_value`: the constant prediction to compare with (finite); none: no comparison.
  /// `head`: how the forecasts (loc, scale) are read (see the file comment).
  explicit NumberCalibration(std::optional<double> baseline_value = std::nullopt, model::RegHead head = model::RegHead::cauchy)
      : baseline_value_(baseline_value), head_(head) {
    detail::require(!baseline_value || std::isfinite(*baseline_value), "NumberCalibration",
                    "the baseline value must be finite, got {}", baseline_value.value_or(0.0));
    for (std::size_t i = 0; i < coverage_levels.size(); ++i) half_widths_[i] = interval_half_width(coverage_levels[i], head);
  }

  /// Adds one target: |loc − y|, |c − y|, nll = log(π·scale) + log1p(((y − loc)/scale)²),
  /// |y − loc| ≤ scale·tan(π·p/2) for each level p, and the PIT bin ⌊10·F_Y(y)⌋ (9 for F_Y(y) = 1);
  /// for a Gaussian head its NLL, half-widths and F_Y; for a point head the errors alone.
  /// DomainError unless y and loc are finite and 0 < scale < ∞.
  void add(double y, double loc, double scale) {
    detail::require(std::isfinite(y) && std::isfinite(loc) && scale > 0 && std::isfinite(scale), "NumberCalibration::add",
                    "needs a finite target, a finite loc and a finite scale > 0, got y = {}, loc = {}, scale = {}", y,
                    loc, scale);
    const double abs_error = std::fabs(y - loc);
    abs_errors_.push_back(abs_error);
    scales_.push_back(scale);
    total_abs_error_ += abs_error;
    if (baseline_value_) {
      const double baseline_error = std::fabs(y - *baseline_value_);
      baseline_abs_errors_.push_back(baseline_error);
      total_baseline_abs_error_ += baseline_error;
    }
    if (!model::has_scale(head_)) return;  // a point: errors only
    const bool gaussian = head_ == model::RegHead::gaussian;
    total_nll_ += gaussian ? model::gaussian_nll_grad(y, loc, scale).value : raw::nll(y, loc, scale);
    for (std::size_t i = 0; i < coverage_levels.size(); ++i) inside_[i] += abs_error <= scale * half_widths_[i];
    const double pit = gaussian ? model::normal_cdf((y - loc) / scale) : raw::cdf(y, loc, scale);
    ++pit_counts_[std::min(static_cast<std::size_t>(pit * static_cast<double>(pit_bin_count)), pit_bin_count - 1)];
  }

  /// n = the number of targets added.
  std::size_t size() const { return abs_errors_.size(); }

  /// The statistics of the targets added so far.
  NumberCalibrationReport report() const {
    NumberCalibrationReport r;
    const std::size_t n = size();
    r.head = head_;
    r.numbers = n;
    r.mae = detail_calibration::per_count(total_abs_error_, n);
    auto abs_errors = abs_errors_;
    r.median_abs_error = detail_calibration::median_of(abs_errors);
    const bool scored = model::has_scale(head_);  // a point head has no NLL, interval or PIT
    if (scored) r.mean_nll = detail_calibration::per_count(total_nll_, n);
    if (baseline_value_) {
      BaselineComparison b;
      b.value = *baseline_value_;
      b.mae = detail_calibration::per_count(total_baseline_abs_error_, n);
      auto baseline_errors = baseline_abs_errors_;
      b.median_abs_error = detail_calibration::median_of(baseline_errors);
      b.mae_ratio = detail_calibration::ratio_of(r.mae, b.mae);
      b.median_abs_error_ratio = detail_calibration::ratio_of(r.median_abs_error, b.median_abs_error);
      r.baseline = b;
    }
    auto scales = scales_;
    const auto median_scale = detail_calibration::median_of(scales);
    for (std::size_t i = 0; i < coverage_levels.size(); ++i) {
      auto& c = r.intervals[i];
      c.nominal = coverage_levels[i];
      c.inside = inside_[i];
      if (n == 0 || !scored) continue;
      c.coverage = static_cast<double>(inside_[i]) / static_cast<double>(n);
      c.standard_error = std::sqrt(c.nominal * (1 - c.nominal) / static_cast<double>(n));
      c.median_width = 2 * half_widths_[i] * *median_scale;
      c.verdict = coverage_verdict(*c.coverage, c.nominal, n);
    }
    r.pit_counts = pit_counts_;
    if (n > 0 && scored) {
      const double expected = static_cast<double>(n) / static_cast<double>(pit_bin_count);
      double chi_square = 0;
      for (auto count : pit_counts_) {
        const double d = static_cast<double>(count) - expected;
        chi_square += d * d / expected;
      }
      r.pit_chi_square = chi_square;
    }
    return r;
  }

 private:
  std::optional<double> baseline_value_;
  model::RegHead head_;
  std::array<double, coverage_levels.size()> half_widths_{};
  std::vector<double> abs_errors_, baseline_abs_errors_, scales_;
  double total_abs_error_ = 0, total_baseline_abs_error_ = 0, total_nll_ = 0;
  std::array<std::size_t, coverage_levels.size()> inside_{};
  std::array<std::size_t, pit_bin_count> pit_counts_{};
};

/// Collects next-token predictions at positions with a label and reports their statistics
/// (see the file comment).
class TokenCalibration {
 public:
  explicit TokenCalibration(std::int64_t num_token_id) : num_token_id_(num_token_id) {}

  /// Adds one position: `predicted` = argmax_k P_k, `label` its label, `confidence` = max_k P_k
  /// (counted in bin ⌊10·confidence⌋, 9 for confidence = 1), `prob_sum` = Σ_k P_k.
  /// DomainError unless confidence ∈ [0, 1] and prob_sum is finite.
  void add(std::int64_t predicted, std::int64_t label, double confidence, double prob_sum) {
    detail::require(confidence >= 0 && confidence <= 1, "TokenCalibration::add",
                    "the confidence max_k P_k must lie in [0, 1], got {}", confidence);
    detail::require(std::isfinite(prob_sum), "TokenCalibration::add", "Σ_k P_k must be finite, got {}", prob_sum);
    const bool hit = predicted == label;
    ++positions_;
    correct_ += hit;
    const bool predicted_num = predicted == num_token_id_, label_num = label == num_token_id_;
    num_predicted_ += predicted_num;
    num_labels_ += label_num;
    num_true_positives_ += predicted_num && label_num;
    total_prob_sum_ += prob_sum;
    const std::size_t bin =
        std::min(static_cast<std::size_t>(confidence * static_cast<double>(reliability_bin_count)), reliability_bin_count - 1);
    ++bin_counts_[bin];
    bin_hits_[bin] += hit;
    bin_confidence_[bin] += confidence;
  }

  /// N = the number of positions added.
  std::size_t size() const { return positions_; }

  /// The statistics of the positions added so far: precision = TP / #predicted <NUM>,
  /// recall = TP / #labels <NUM>, F1 = 2·TP / (#predicted + #labels) (= 2PR/(P + R)).
  TokenCalibrationReport report() const {
    TokenCalibrationReport r;
    r.positions = positions_;
    r.correct = correct_;
    r.accuracy = detail_calibration::per_count(static_cast<double>(correct_), positions_);
    r.num_true_positives = num_true_positives_;
    r.num_predicted = num_predicted_;
    r.num_labels = num_labels_;
    r.num_precision = detail_calibration::per_count(static_cast<double>(num_true_positives_), num_predicted_);
    r.num_recall = detail_calibration::per_count(static_cast<double>(num_true_positives_), num_labels_);
    r.num_f1 = detail_calibration::per_count(2.0 * static_cast<double>(num_true_positives_), num_predicted_ + num_labels_);
    r.mean_prob_sum = detail_calibration::per_count(total_prob_sum_, positions_);
    double ece = 0;
    for (std::size_t b = 0; b < reliability_bin_count; ++b) {
      auto& bin = r.reliability[b];
      bin.lower = static_cast<double>(b) / static_cast<double>(reliability_bin_count);
      bin.upper = static_cast<double>(b + 1) / static_cast<double>(reliability_bin_count);
      bin.count = bin_counts_[b];
      bin.hits = bin_hits_[b];
      bin.mean_confidence = detail_calibration::per_count(bin_confidence_[b], bin.count);
      bin.accuracy = detail_calibration::per_count(static_cast<double>(bin.hits), bin.count);
      if (bin.count)
        ece += static_cast<double>(bin.count) / static_cast<double>(positions_) * std::fabs(*bin.accuracy - *bin.mean_confidence);
    }
    if (positions_) r.ece = ece;
    return r;
  }

 private:
  std::int64_t num_token_id_;
  std::size_t positions_ = 0, correct_ = 0, num_true_positives_ = 0, num_predicted_ = 0, num_labels_ = 0;
  double total_prob_sum_ = 0;
  std::array<std::size_t, reliability_bin_count> bin_counts_{}, bin_hits_{};
  std::array<double, reliability_bin_count> bin_confidence_{};
};

/// The number and token accumulators of one set of positions.
struct CalibrationTally {
  NumberCalibration numbers;
  TokenCalibration tokens;

  CalibrationTally(std::int64_t num_token_id, std::optional<double> baseline_value,
                   model::RegHead head = model::RegHead::cauchy)
      : numbers(baseline_value, head), tokens(num_token_id) {}
  /// Both accumulators' statistics.
  CalibrationStatistics report() const { return {numbers.report(), tokens.report()}; }
};

/// The accumulators of an evaluation: one for every position, one per group of sequences.
class GroupedCalibration {
 public:
  GroupedCalibration(std::int64_t num_token_id, std::optional<double> baseline_value,
                     model::RegHead head = model::RegHead::cauchy)
      : num_token_id_(num_token_id), baseline_value_(baseline_value), head_(head), overall_(num_token_id, baseline_value, head) {}

  /// The tally of every position, whatever its group.
  CalibrationTally& overall() { return overall_; }
  /// The tally of the group `name`, created empty on first use.
  CalibrationTally& group(const std::string& name) {
    return groups_.try_emplace(name, num_token_id_, baseline_value_, head_).first->second;
  }

  /// The overall statistics and those of every group that received a position.
  CalibrationReport report() const {
    CalibrationReport r;
    r.overall = overall_.report();
    for (const auto& [name, tally] : groups_) r.groups.emplace(name, tally.report());
    return r;
  }

 private:
  std::int64_t num_token_id_;
  std::optional<double> baseline_value_;
  model::RegHead head_;
  CalibrationTally overall_;
  std::map<std::string, CalibrationTally> groups_;
};

// ------------------------------------------------------------------ JSON

namespace detail_calibration {

using Json = nlohmann::json;

/// A finite number as itself; nullopt or a non-finite number as null.
inline Json number_or_null(std::optional<double> value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  return *value;
}

/// object[key]: nullopt when null, else a number; FormatError when absent or of another type.
inline std::optional<double> optional_number(const Json& object, std::string_view key, std::string_view source,
                                             std::string_view path) {
  const auto value = json::field<Json>(object, key, source, path);
  if (value.is_null()) return std::nullopt;
  return json::as<double>(value, source, fmt::format("{}.{}", path, key));
}

/// object[key] as an array of exactly N elements; FormatError otherwise.
template <std::size_t N>
const Json& fixed_array(const Json& object, std::string_view key, std::string_view source, std::string_view path) {
  if (!object.is_object() || !object.contains(key) || !object[std::string(key)].is_array() ||
      object[std::string(key)].size() != N)
    throw FormatError(fmt::format("{}: {}.{} must be an array of {} elements", source, path, key, N));
  return object[std::string(key)];
}

/// The number statistics as JSON (undefined ones as null).
inline Json to_json(const NumberCalibrationReport& r) {
  Json intervals = Json::array();
  for (const auto& c : r.intervals)
    intervals.push_back({{"nominal", c.nominal},
                         {"inside", c.inside},
                         {"coverage", number_or_null(c.coverage)},
                         {"standard_error", number_or_null(c.standard_error)},
                         {"median_width", number_or_null(c.median_width)},
                         {"verdict", c.verdict ? Json(std::string(verdict_name(*c.verdict))) : Json(nullptr)}});
  Json baseline = nullptr;
  if (r.baseline)
    baseline = {{"value", r.baseline->value},
                {"mae", number_or_null(r.baseline->mae)},
                {"median_abs_error", number_or_null(r.baseline->median_abs_error)},
                {"mae_ratio", number_or_null(r.baseline->mae_ratio)},
                {"median_abs_error_ratio", number_or_null(r.baseline->median_abs_error_ratio)}};
  return {{"distribution", std::string(model::reg_head_name(r.head))},
          {"numbers", r.numbers},
          {"mae", number_or_null(r.mae)},
          {"median_abs_error", number_or_null(r.median_abs_error)},
          {"mean_nll", number_or_null(r.mean_nll)},
          {"baseline", baseline},
          {"intervals", intervals},
          {"pit_counts", r.pit_counts},
          {"pit_chi_square", number_or_null(r.pit_chi_square)}};
}

/// The token statistics as JSON (undefined ones as null).
inline Json to_json(const TokenCalibrationReport& r) {
  Json reliability = Json::array();
  for (const auto& b : r.reliability)
    reliability.push_back({{"lower", b.lower},
                           {"upper", b.upper},
                           {"count", b.count},
                           {"hits", b.hits},
                           {"mean_confidence", number_or_null(b.mean_confidence)},
                           {"accuracy", number_or_null(b.accuracy)}});
  return {{"positions", r.positions},
          {"correct", r.correct},
          {"accuracy", number_or_null(r.accuracy)},
          {"num_true_positives", r.num_true_positives},
          {"num_predicted", r.num_predicted},
          {"num_labels", r.num_labels},
          {"num_precision", number_or_null(r.num_precision)},
          {"num_recall", number_or_null(r.num_recall)},
          {"num_f1", number_or_null(r.num_f1)},
          {"mean_prob_sum", number_or_null(r.mean_prob_sum)},
          {"reliability", reliability},
          {"ece", number_or_null(r.ece)}};
}

/// {"numbers": …, "tokens": …}.
inline Json to_json(const CalibrationStatistics& s) {
  return {{"numbers", to_json(s.numbers)}, {"tokens", to_json(s.tokens)}};
}

/// to_json(NumberCalibrationReport)'s inverse; `path` names the object in error messages.
inline NumberCalibrationReport numbers_from_json(const Json& j, std::string_view source, const std::string& path) {
  NumberCalibrationReport r;
  if (j.is_object() && j.contains("distribution")) {  // absent: cauchy
    const auto name = json::field<std::string>(j, "distribution", source, path);
    if (!model::parse_reg_head(name, r.head))
      throw FormatError(fmt::format("{}: {}.distribution must be \"cauchy\", \"gaussian\" or \"mse\", got \"{}\"", source,
                                    path, name));
  }
  r.numbers = json::field<std::size_t>(j, "numbers", source, path);
  r.mae = optional_number(j, "mae", source, path);
  r.median_abs_error = optional_number(j, "median_abs_error", source, path);
  r.mean_nll = optional_number(j, "mean_nll", source, path);
  const auto baseline = json::field<Json>(j, "baseline", source, path);
  if (!baseline.is_null()) {
    const std::string where = path + ".baseline";
    BaselineComparison b;
    b.value = json::field<double>(baseline, "value", source, where);
    b.mae = optional_number(baseline, "mae", source, where);
    b.median_abs_error = optional_number(baseline, "median_abs_error", source, where);
    b.mae_ratio = optional_number(baseline, "mae_ratio", source, where);
    b.median_abs_error_ratio = optional_number(baseline, "median_abs_error_ratio", source, where);
    r.baseline = b;
  }
  const auto& intervals = fixed_array<coverage_levels.size()>(j, "intervals", source, path);
  for (std::size_t i = 0; i < coverage_levels.size(); ++i) {
    const std::string where = fmt::format("{}.intervals[{}]", path, i);
    auto& c = r.intervals[i];
    c.nominal = json::field<double>(intervals[i], "nominal", source, where);
    c.inside = json::field<std::size_t>(intervals[i], "inside", source, where);
    c.coverage = optional_number(intervals[i], "coverage", source, where);
    c.standard_error = optional_number(intervals[i], "standard_error", source, where);
    c.median_width = optional_number(intervals[i], "median_width", source, where);
    const auto verdict = json::field<Json>(intervals[i], "verdict", source, where);
    if (!verdict.is_null()) c.verdict = verdict_from_name(json::as<std::string>(verdict, source, where + ".verdict"), source);
  }
  const auto& pit = fixed_array<pit_bin_count>(j, "pit_counts", source, path);
  for (std::size_t b = 0; b < pit_bin_count; ++b)
    r.pit_counts[b] = json::as<std::size_t>(pit[b], source, fmt::format("{}.pit_counts[{}]", path, b));
  r.pit_chi_square = optional_number(j, "pit_chi_square", source, path);
  return r;
}

/// to_json(TokenCalibrationReport)'s inverse; `path` names the object in error messages.
inline TokenCalibrationReport tokens_from_json(const Json& j, std::string_view source, const std::string& path) {
  TokenCalibrationReport r;
  r.positions = json::field<std::size_t>(j, "positions", source, path);
  r.correct = json::field<std::size_t>(j, "correct", source, path);
  r.accuracy = optional_number(j, "accuracy", source, path);
  r.num_true_positives = json::field<std::size_t>(j, "num_true_positives", source, path);
  r.num_predicted = json::field<std::size_t>(j, "num_predicted", source, path);
  r.num_labels = json::field<std::size_t>(j, "num_labels", source, path);
  r.num_precision = optional_number(j, "num_precision", source, path);
  r.num_recall = optional_number(j, "num_recall", source, path);
  r.num_f1 = optional_number(j, "num_f1", source, path);
  r.mean_prob_sum = optional_number(j, "mean_prob_sum", source, path);
  const auto& bins = fixed_array<reliability_bin_count>(j, "reliability", source, path);
  for (std::size_t b = 0; b < reliability_bin_count; ++b) {
    const std::string where = fmt::format("{}.reliability[{}]", path, b);
    auto& bin = r.reliability[b];
    bin.lower = json::field<double>(bins[b], "lower", source, where);
    bin.upper = json::field<double>(bins[b], "upper", source, where);
    bin.count = json::field<std::size_t>(bins[b], "count", source, where);
    bin.hits = json::field<std::size_t>(bins[b], "hits", source, where);
    bin.mean_confidence = optional_number(bins[b], "mean_confidence", source, where);
    bin.accuracy = optional_number(bins[b], "accuracy", source, where);
  }
  r.ece = optional_number(j, "ece", source, path);
  return r;
}

/// to_json(CalibrationStatistics)'s inverse; `path` names the object in error messages.
inline CalibrationStatistics statistics_from_json(const Json& j, std::string_view source, const std::string& path) {
  return {numbers_from_json(json::field<Json>(j, "numbers", source, path), source, path + ".numbers"),
          tokens_from_json(json::field<Json>(j, "tokens", source, path), source, path + ".tokens")};
}

}  // namespace detail_calibration

/// The report as JSON: {"format", "levels", "overall": {"numbers", "tokens"}, "groups": {name: …}},
/// every undefined statistic as null.
inline nlohmann::json calibration_to_json(const CalibrationReport& report) {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, statistics] : report.groups) groups[name] = detail_calibration::to_json(statistics);
  return {{"format", calibration_format},
          {"levels", coverage_levels},
          {"overall", detail_calibration::to_json(report.overall)},
          {"groups", groups}};
}

/// calibration_to_json's inverse; FormatError naming `source` and the field when the JSON is
/// not such a report.
inline CalibrationReport calibration_from_json(const nlohmann::json& j, std::string_view source) {
  return json::guarded(source, [&] {
    if (json::field<std::string>(j, "format", source) != calibration_format)
      throw FormatError(fmt::format("{}: field 'format' must be \"{}\"", source, calibration_format));
    CalibrationReport r;
    r.overall = detail_calibration::statistics_from_json(json::field<nlohmann::json>(j, "overall", source), source, "overall");
    const auto groups = json::field<nlohmann::json>(j, "groups", source);
    if (!groups.is_object()) throw FormatError(fmt::format("{}: groups must be an object", source));
    for (const auto& [name, statistics] : groups.items())
      r.groups.emplace(name, detail_calibration::statistics_from_json(statistics, source, "groups." + name));
    return r;
  });
}

}  // namespace causalqwen::eval
