// eval/risk_coverage.hpp: the risk–coverage curve of hand-made forecasts (MAE and coverage of
// the numbers kept, narrowest interval first), and on synthetic data whose interval widths carry
// information: the MAE falls as the widest intervals are set aside.
#include <causalqwen/eval/risk_coverage.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

namespace ce = causalqwen::eval;

TEST_CASE("risk-coverage curve by hand: four numbers, narrowest interval first") {
  // scales 1, 4, 2, 8 (widths at 50 %: 2, 8, 4, 16); errors 0.5, 3, 5, 1
  const std::vector<ce::NumberForecast> f{{0.5, 0, 1}, {3, 0, 4}, {5, 0, 2}, {1, 0, 8}};
  const auto curve = ce::risk_coverage_curve(f, 0.5, ce::ForecastFamily::cauchy, nullptr, {}, 4);
  REQUIRE(curve.size() == 4);
  // kept order: #0 (w 2), #2 (w 4), #1 (w 8), #3 (w 16)
  CHECK(curve[0].kept == 1);
  CHECK(curve[0].mae == doctest::Approx(0.5));
  CHECK(curve[0].coverage == 1.0);
  CHECK(curve[0].max_width == doctest::Approx(2));
  CHECK(curve[1].mae == doctest::Approx(2.75));      // (0.5 + 5)/2
  CHECK(curve[1].coverage == doctest::Approx(0.5));  // 5 is outside [−2, 2]
  CHECK(curve[2].mae == doctest::Approx(8.5 / 3));
  CHECK(curve[2].coverage == doctest::Approx(2.0 / 3));
  CHECK(curve[3].kept_fraction == 1.0);
  CHECK(curve[3].mae == doctest::Approx(9.5 / 4));
  CHECK(curve[3].max_width == doctest::Approx(16));
  // a calibration's multiplier widens every interval alike: the same order, wider intervals
  ce::IntervalCalibration c;
  c.pooled.temperature = 3.0;
  const auto wider = ce::risk_coverage_curve(f, 0.5, ce::ForecastFamily::cauchy, &c, {}, 4);
  CHECK(wider[1].coverage == 1.0);
  CHECK(wider[3].max_width == doctest::Approx(48));
  CHECK(ce::risk_coverage_curve({}, 0.5).empty());
  CHECK(ce::risk_coverage_curve(f, 0.5, ce::ForecastFamily::point).empty());
  CHECK(ce::risk_coverage_to_json(curve)[1]["mae"].get<double>() == doctest::Approx(2.75));
}

TEST_CASE("risk-coverage: more steps than numbers gives one point per number; fewer gives ⌈n·j/steps⌉") {
  std::vector<ce::NumberForecast> f;
  for (int i = 0; i < 10; ++i) f.push_back({0, 0, 1.0 + i});
  CHECK(ce::risk_coverage_curve(f, 0.9, ce::ForecastFamily::cauchy, nullptr, {}, 20).size() == 10);
  const auto curve = ce::risk_coverage_curve(f, 0.9, ce::ForecastFamily::cauchy, nullptr, {}, 3);
  REQUIRE(curve.size() == 3);
  CHECK(curve[0].kept == 4);  // ⌈10/3⌉
  CHECK(curve[1].kept == 7);  // ⌈20/3⌉
  CHECK(curve[2].kept == 10);
}

TEST_CASE("risk-coverage on informative widths: the MAE of the narrowest tenth is far below the MAE of all") {
  const auto seed = cqtest::test_seed(64010, "risk coverage informative widths");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<ce::NumberForecast> f;
  for (int i = 0; i < 5000; ++i) {
    const double scale = std::exp(4 * u(rng));  // 1 … 55, and the true error has that scale
    f.push_back({scale * std::tan(std::numbers::pi * (u(rng) - 0.5)), 0, scale});
  }
  const auto curve = ce::risk_coverage_curve(f, 0.9, ce::ForecastFamily::cauchy, nullptr, {}, 10);
  REQUIRE(curve.size() == 10);
  MESSAGE("MAE of the narrowest 10%: ", curve[0].mae, ", of all: ", curve.back().mae);
  CHECK(curve[0].mae < 0.2 * curve.back().mae);
  for (const auto& p : curve) CHECK(p.coverage == doctest::Approx(0.9).epsilon(0.08));
}
