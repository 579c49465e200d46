/// Recalibration of the central intervals loc ± scale·w(p) of a regression head (w(p) its
/// family's unit half-width, eval/forecast.hpp) by one multiplier m_p of the scale per level:
/// the calibrated interval of level p is loc ± m_p·scale·w(p). Fitted on calibration numbers
/// (y_i, loc_i, scale_i), i = 1…n, disjoint from the numbers the intervals are then used on.
///
/// Split conformal (method "conformal"): with the nonconformity scores s_i = |y_i − loc_i|/scale_i,
/// the rank k = ⌈(n + 1)·p⌉ and s_(k) the k-th smallest score,
///     m_p = s_(k) / w(p),   so that loc ± m_p·scale·w(p) = loc ± s_(k)·scale
/// covers a new exchangeable number with probability ≥ p (and < p + 1/(n + 1) without ties).
/// When k > n, which happens for n < p/(1 − p) (fewer than 9 numbers for p = 0.9, 19 for 0.95,
/// 99 for 0.99), the only interval with that guarantee is the whole line: no finite multiplier
/// exists and the level is refused (DomainError naming the level and the n it needs).
///
/// Temperature (method "temperature"): one factor t for every level, m_p = t, the maximum-
/// likelihood scale multiplier: for the Cauchy the root of Σ_i (t² − r_i²)/(t² + r_i²) = 0 with
/// r_i = s_i (the left side increases with t; solved by bisection on log t), for the Gaussian
/// t² = mean r_i².
///
/// Mondrian (by group): the same per group of numbers; a group with fewer than `min_group_size`
/// numbers, or too few for a level, uses the multipliers of all the numbers pooled, and so does a
/// group the calibration never saw.
///
/// Stored as calibration.json in the model directory (calibration_file_name):
///   {"format": "causalqwen-interval-calibration-1", "method": "conformal" | "temperature",
///    "distribution": "cauchy" | "gaussian", "min_group_size": 50, "data": "<calibration file>",
///    "pooled": {"numbers": n, "levels": [{"level": p, "rank": k, "score": s_(k), "multiplier": m_p}, …]}
///              (conformal) or {"numbers": n, "temperature": t} (temperature),
///    "groups": {"<name>": the same as "pooled", …}}
/// read strictly: every field checked, unknown fields refused, errors naming the file and field.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/eval/forecast.hpp"
#include "causalqwen/format/atomic_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::eval {

/// The "format" field of calibration.json.
inline constexpr const char* interval_calibration_format = "causalqwen-interval-calibration-1";
/// The file's name in the model directory.
inline constexpr const char* calibration_file_name = "calibration.json";
/// The default smallest group that gets its own multipliers (smaller groups use the pooled ones).
inline constexpr std::size_t default_min_group_size = 50;

enum class CalibrationMethod { conformal, temperature };

/// "conformal" or "temperature".
inline std::string_view method_name(CalibrationMethod m) {
  return m == CalibrationMethod::temperature ? "temperature" : "conformal";
}

/// s = |y − loc| / scale, the nonconformity score of one number.
inline double conformal_score(const NumberForecast& f) { return std::fabs(f.y - f.loc) / f.scale; }

/// k = ⌈(n + 1)·p⌉, the rank of the conformal quantile (a product within 1e-9 of an integer
/// counts as that integer, so that rounding in (n + 1)·p never raises k by one).
inline std::size_t conformal_rank(std::size_t n, double level) {
  const double x = static_cast<double>(n + 1) * level;
  const double nearest = std::round(x);
  if (std::fabs(x - nearest) <= 1e-9 * std::max(1.0, x)) return static_cast<std::size_t>(nearest);
  return static_cast<std::size_t>(std::ceil(x));
}

/// The smallest n with conformal_rank(n, p) ≤ n: the fewest numbers that give level p a
/// finite multiplier.
inline std::size_t conformal_min_numbers(double level) {
  std::size_t n = 1;
  while (conformal_rank(n, level) > n) ++n;
  return n;
}

/// The multiplier of one level.
struct LevelMultiplier {
  double level = 0;        // p
  std::size_t rank = 0;    // k = ⌈(n + 1)·p⌉
  double score = 0;        // s_(k)
  double multiplier = 1;   // m_p = s_(k) / w(p)
};

/// The multipliers fitted on one set of numbers (all of them, or one group).
struct ScaleMultipliers {
  std::size_t numbers = 0;
  std::optional<double> temperature;     // temperature: m_p = t at every level
  std::vector<LevelMultiplier> levels;   // conformal: one per level, in increasing level

  /// m_p at `level`: the temperature, or the conformal multiplier of that level; nullopt when
  /// this set has none for the level.
  std::optional<double> multiplier_at(double level) const {
    if (temperature) return temperature;
    for (const auto& l : levels)
      if (std::fabs(l.level - level) <= 1e-12) return l.multiplier;
    return std::nullopt;
  }
};

/// m_p = s_(k)/w(p) for each level (split conformal, see the file comment). DomainError when a
/// level has k > n, naming the level and the numbers it needs.
inline ScaleMultipliers fit_conformal(std::vector<double> scores, const std::vector<double>& levels, ForecastFamily family) {
  ScaleMultipliers m;
  m.numbers = scores.size();
  std::sort(scores.begin(), scores.end());
  for (double p : levels) {
    const std::size_t k = conformal_rank(scores.size(), p);
    detail::require(k <= scores.size(), "fit_conformal",
                    "level {} needs at least {} calibration numbers (⌈(n + 1)·p⌉ ≤ n), got {}", p,
                    conformal_min_numbers(p), scores.size());
    const double s = scores[k - 1];
    m.levels.push_back({p, k, s, s / unit_half_width(family, p)});
  }
  return m;
}

/// The maximum-likelihood scale multiplier t (see the file comment). DomainError without a
/// number, or when all scores are 0 (no finite t).
inline ScaleMultipliers fit_temperature(const std::vector<double>& scores, ForecastFamily family) {
  ScaleMultipliers m;
  m.numbers = scores.size();
  detail::require(!scores.empty(), "fit_temperature", "needs at least one calibration number");
  if (family == ForecastFamily::gaussian) {
    double total = 0;
    for (double r : scores) total += r * r;
    detail::require(total > 0, "fit_temperature", "every calibration number is predicted exactly: no finite temperature");
    m.temperature = std::sqrt(total / static_cast<double>(scores.size()));
    return m;
  }
  // Cauchy: g(t) = Σ (t² − r²)/(t² + r²) increases from −#{r > 0} + #{r = 0} to n
  std::size_t zeros = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double r : scores) {
    if (r == 0) ++zeros;
    else lo = std::min(lo, r), hi = std::max(hi, r);
  }
  detail::require(2 * zeros < scores.size(), "fit_temperature",
                  "half or more of the calibration numbers are predicted exactly: no finite temperature");
  const auto g = [&](double t) {
    double total = 0;
    for (double r : scores) total += (t - r) * (t + r) / (t * t + r * r);
    return total;
  };
  double a = std::log(lo), b = std::log(hi);  // g(lo) ≤ 0 ≤ g(hi)
  for (int i = 0; i < 200 && b - a > 1e-14 * std::max(1.0, std::fabs(a)); ++i) {
    const double mid = 0.5 * (a + b);
    (g(std::exp(mid)) < 0 ? a : b) = mid;
  }
  m.temperature = std::exp(0.5 * (a + b));
  return m;
}

/// A fitted recalibration of a model's intervals (see the file comment).
struct IntervalCalibration {
  CalibrationMethod method = CalibrationMethod::conformal;
  ForecastFamily distribution = ForecastFamily::cauchy;
  std::size_t min_group_size = default_min_group_size;
  std::string data;                               // the calibration numbers' file, for the record
  ScaleMultipliers pooled;
  std::map<std::string, ScaleMultipliers> groups;  // only groups with their own multipliers

  /// The levels with a multiplier: the conformal levels; every level for a temperature.
  std::vector<double> levels() const {
    std::vector<double> out;
    for (const auto& l : pooled.levels) out.push_back(l.level);
    return out;
  }
  /// Whether `level` has a multiplier (always, for a temperature).
  bool has_level(double level) const { return pooled.multiplier_at(level).has_value(); }

  /// m_p for `level` and `group` (nullptr: none): the group's own multiplier when it has one for
  /// that level, else the pooled one. DomainError when the calibration has none for the level.
  double multiplier(double level, const std::string* group = nullptr) const {
    if (group) {
      const auto it = groups.find(*group);
      if (it != groups.end())
        if (const auto m = it->second.multiplier_at(level)) return *m;
    }
    const auto m = pooled.multiplier_at(level);
    if (!m) {
      std::string have;
      for (double p : levels()) have += fmt::format("{}{}", have.empty() ? "" : ", ", p);
      throw DomainError(fmt::format("the interval calibration ({}) has no multiplier for level {}: it was fitted for {}",
                                    data, level, have));
    }
    return *m;
  }
};

/// The central interval of level p of the forecast Cauchy/Gaussian(loc, scale) of `family`:
/// loc ± m_p·scale·w(p), with m_p from `calibration` (the group's, else the pooled one) and
/// m_p = 1 without one. The library's one map from (loc, scale, level[, group]) to an interval,
/// used wherever an interval is printed.
inline Interval central_interval(double loc, double scale, double level, const IntervalCalibration* calibration = nullptr,
                                 const std::string* group = nullptr, ForecastFamily family = ForecastFamily::cauchy) {
  if (calibration) family = calibration->distribution;
  const double m = calibration ? calibration->multiplier(level, group) : 1.0;
  const double half = m * scale * unit_half_width(family, level);
  return {loc - half, loc + half};
}

/// Fits the calibration of `method` on `forecasts` (with `group_of_number[i]` the group of
/// number i when grouping, else empty) at `levels` (conformal; ignored by temperature).
/// DomainError for an empty set or a level that needs more numbers than the pooled set holds.
inline IntervalCalibration fit_interval_calibration(const std::vector<NumberForecast>& forecasts,
                                                    const std::vector<std::string>& group_of_number,
                                                    const std::vector<double>& levels, CalibrationMethod method,
                                                    ForecastFamily family, std::size_t min_group_size = default_min_group_size) {
  detail::require(!forecasts.empty(), "fit_interval_calibration", "needs at least one calibration number");
  detail::require(family != ForecastFamily::point, "fit_interval_calibration", "a point forecast has no interval to calibrate");
  detail::require(group_of_number.empty() || group_of_number.size() == forecasts.size(), "fit_interval_calibration",
                  "{} groups given for {} numbers", group_of_number.size(), forecasts.size());
  const auto fit = [&](const std::vector<double>& scores) {
    return method == CalibrationMethod::temperature ? fit_temperature(scores, family) : fit_conformal(scores, levels, family);
  };
  IntervalCalibration c;
  c.method = method;
  c.distribution = family;
  c.min_group_size = min_group_size;
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_group;
  for (std::size_t i = 0; i < forecasts.size(); ++i) {
    all.push_back(conformal_score(forecasts[i]));
    if (!group_of_number.empty()) by_group[group_of_number[i]].push_back(all.back());
  }
  c.pooled = fit(all);
  for (auto& [name, scores] : by_group) {
    if (scores.size() < min_group_size) continue;
    if (method == CalibrationMethod::temperature) {
      c.groups.emplace(name, fit(scores));
      continue;
    }
    std::vector<double> fitting;  // the levels this group has enough numbers for
    for (double p : levels)
      if (conformal_rank(scores.size(), p) <= scores.size()) fitting.push_back(p);
    if (!fitting.empty()) c.groups.emplace(name, fit_conformal(scores, fitting, family));
  }
  return c;
}

// ------------------------------------------------------------------ calibration.json

namespace detail_interval_calibration {

using Json = nlohmann::json;

inline Json multipliers_to_json(const ScaleMultipliers& m) {
  Json j = {{"numbers", m.numbers}};
  if (m.temperature) {
    j["temperature"] = *m.temperature;
    return j;
  }
  Json levels = Json::array();
  for (const auto& l : m.levels)
    levels.push_back({{"level", l.level}, {"rank", l.rank}, {"score", l.score}, {"multiplier", l.multiplier}});
  j["levels"] = levels;
  return j;
}

/// FormatError unless `object` is an object whose keys are all in `allowed`.
inline void require_keys(const Json& object, std::initializer_list<std::string_view> allowed, std::string_view source,
                         std::string_view path) {
  if (!object.is_object()) throw FormatError(fmt::format("{}: {} must be an object", source, path.empty() ? "the file" : path));
  for (const auto& [key, value] : object.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw FormatError(fmt::format("{}: unknown field '{}{}{}'", source, path, path.empty() ? "" : ".", key));
}

inline ScaleMultipliers multipliers_from_json(const Json& j, CalibrationMethod method, std::string_view source,
                                              const std::string& path) {
  ScaleMultipliers m;
  if (method == CalibrationMethod::temperature) {
    require_keys(j, {"numbers", "temperature"}, source, path);
    m.numbers = json::field<std::size_t>(j, "numbers", source, path);
    const double t = json::field<double>(j, "temperature", source, path);
    if (!(t > 0)) throw FormatError(fmt::format("{}: {}.temperature must be a number > 0, got {}", source, path, t));
    m.temperature = t;
    return m;
  }
  require_keys(j, {"numbers", "levels"}, source, path);
  m.numbers = json::field<std::size_t>(j, "numbers", source, path);
  const auto levels = json::field<Json>(j, "levels", source, path);
  if (!levels.is_array() || levels.empty())
    throw FormatError(fmt::format("{}: {}.levels must be a non-empty array", source, path));
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::string where = fmt::format("{}.levels[{}]", path, i);
    require_keys(levels[i], {"level", "rank", "score", "multiplier"}, source, where);
    LevelMultiplier l;
    l.level = json::field<double>(levels[i], "level", source, where);
    l.rank = json::field<std::size_t>(levels[i], "rank", source, where);
    l.score = json::field<double>(levels[i], "score", source, where);
    l.multiplier = json::field<double>(levels[i], "multiplier", source, where);
    if (!(l.level > 0 && l.level < 1))
      throw FormatError(fmt::format("{}: {}.level must lie in (0, 1), got {}", source, where, l.level));
    if (!(l.multiplier > 0) || !std::isfinite(l.multiplier))
      throw FormatError(fmt::format("{}: {}.multiplier must be a finite number > 0, got {}", source, where, l.multiplier));
    if (!m.levels.empty() && !(l.level > m.levels.back().level))
      throw FormatError(fmt::format("{}: {}.level must be greater than the level before it", source, where));
    m.levels.push_back(l);
  }
  return m;
}

}  // namespace detail_interval_calibration

/// The calibration as the JSON of calibration.json (see the file comment).
inline nlohmann::json interval_calibration_to_json(const IntervalCalibration& c) {
  using detail_interval_calibration::multipliers_to_json;
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, m] : c.groups) groups[name] = multipliers_to_json(m);
  return {{"format", interval_calibration_format},
          {"method", method_name(c.method)},
          {"distribution", family_name(c.distribution)},
          {"min_group_size", c.min_group_size},
          {"data", c.data},
          {"pooled", multipliers_to_json(c.pooled)},
          {"groups", groups}};
}

/// interval_calibration_to_json's inverse; FormatError naming `source` and the field for
/// anything else (a missing or unknown field, a wrong type, a level outside (0, 1), a
/// multiplier that is not finite and > 0).
inline IntervalCalibration interval_calibration_from_json(const nlohmann::json& j, std::string_view source) {
  using namespace detail_interval_calibration;
  return json::guarded(source, [&] {
    require_keys(j, {"format", "method", "distribution", "min_group_size", "data", "pooled", "groups"}, source, "");
    const auto format = json::field<std::string>(j, "format", source);
    if (format != interval_calibration_format)
      throw FormatError(fmt::format("{}: field 'format' must be \"{}\", got \"{}\"", source, interval_calibration_format, format));
    IntervalCalibration c;
    const auto method = json::field<std::string>(j, "method", source);
    if (method == "conformal") c.method = CalibrationMethod::conformal;
    else if (method == "temperature") c.method = CalibrationMethod::temperature;
    else throw FormatError(fmt::format("{}: field 'method' must be \"conformal\" or \"temperature\", got \"{}\"", source, method));
    c.distribution = family_from_name(json::field<std::string>(j, "distribution", source), fmt::format("{}: field 'distribution'", source));
    if (c.distribution == ForecastFamily::point)
      throw FormatError(fmt::format("{}: field 'distribution' must be \"cauchy\" or \"gaussian\" (a point forecast has no interval)", source));
    c.min_group_size = json::field<std::size_t>(j, "min_group_size", source);
    c.data = json::field<std::string>(j, "data", source);
    c.pooled = multipliers_from_json(json::field<nlohmann::json>(j, "pooled", source), c.method, source, "pooled");
    const auto groups = json::field<nlohmann::json>(j, "groups", source);
    if (!groups.is_object()) throw FormatError(fmt::format("{}: field 'groups' must be an object", source));
    for (const auto& [name, m] : groups.items())
      c.groups.emplace(name, multipliers_from_json(m, c.method, source, "groups." + name));
    return c;
  });
}

/// Writes `c` as DIR/calibration.json (atomically: a crash leaves the old file or the new one).
inline void save_interval_calibration(const IntervalCalibration& c, const std::filesystem::path& model_dir) {
  const auto text = interval_calibration_to_json(c).dump(2) + "\n";
  format::write_file_atomically(model_dir / calibration_file_name, [&](format::AtomicFile& f) { f.write(text); });
}

/// DIR/calibration.json read strictly, or nullopt when the model directory has none.
inline std::optional<IntervalCalibration> load_interval_calibration(const std::filesystem::path& model_dir) {
  const auto path = model_dir / calibration_file_name;
  if (!std::filesystem::exists(path)) return std::nullopt;
  return interval_calibration_from_json(json::parse_file(path), path.string());
}

}  // namespace causalqwen::eval
