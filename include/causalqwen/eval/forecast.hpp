/// A predictive distribution of one number, as a regression head gives it: its family and its
/// location and scale.
///   cauchy    Y ~ Cauchy(loc, scale)   central interval of level p: loc ± scale·tan(π·p/2)
///   gaussian  Y ~ N(loc, scale²)       central interval of level p: loc ± scale·Φ⁻¹(½ + p/2)
///   point     Y = loc (no scale)       no interval
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/eval/scores.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace causalqwen::eval {

enum class ForecastFamily { cauchy, gaussian, point };

/// "cauchy", "gaussian" or "point".
inline std::string_view family_name(ForecastFamily family) {
  switch (family) {
    case ForecastFamily::gaussian: return "gaussian";
    case ForecastFamily::point: return "point";
    case ForecastFamily::cauchy: break;
  }
  return "cauchy";
}

/// family_name's inverse; FormatError naming `source` otherwise.
inline ForecastFamily family_from_name(std::string_view name, std::string_view source) {
  for (auto f : {ForecastFamily::cauchy, ForecastFamily::gaussian, ForecastFamily::point})
    if (family_name(f) == name) return f;
  throw FormatError(fmt::format("{}: the distribution must be \"cauchy\", \"gaussian\" or \"point\", got \"{}\"", source, name));
}

/// w(p): the half-width of the central interval of level p in units of the scale (tan(π·p/2)
/// for the Cauchy, Φ⁻¹(½ + p/2) for the Gaussian, 0 for a point forecast).
inline double unit_half_width(ForecastFamily family, double level) {
  switch (family) {
    case ForecastFamily::gaussian: return gaussian_half_width(level);
    case ForecastFamily::point: return 0;
    case ForecastFamily::cauchy: break;
  }
  return cauchy_half_width(level);
}

/// One number's forecast and the value observed.
struct NumberForecast {
  double y = 0;      // the observed value
  double loc = 0;    // the forecast's location (the point forecast for `point`)
  double scale = 0;  // its scale (unused for `point`)
};

/// A closed interval [lower, upper].
struct Interval {
  double lower = 0, upper = 0;
  double width() const { return upper - lower; }
  bool contains(double y) const { return lower <= y && y <= upper; }
};

}  // namespace causalqwen::eval
