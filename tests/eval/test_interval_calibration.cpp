// eval/interval_calibration.hpp and eval/number_scores.hpp: the conformal rank and multiplier
// against a brute-force quantile; the finite-sample coverage guarantee on synthetic Cauchy data
// over many seeds; Mondrian groups and their fallback; the temperature's maximum-likelihood
// factor; the round trip through a model directory and the strict reading of calibration.json;
// and a calibration fitted on one split improving the coverage and interval score of another.
#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/eval/number_scores.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace ce = causalqwen::eval;
namespace fs = std::filesystem;

namespace {

/// n numbers y ~ Cauchy(loc, true_scale) with loc ~ U(−10, 10) and the predicted scale
/// `true_scale / miscalibration` (miscalibration > 1: too narrow intervals).
std::vector<ce::NumberForecast> cauchy_numbers(std::mt19937_64& rng, std::size_t n, double predicted_scale,
                                               double true_scale) {
  std::uniform_real_distribution<double> u(0.0, 1.0), where(-10.0, 10.0);
  std::vector<ce::NumberForecast> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double loc = where(rng);
    out.push_back({loc + true_scale * std::tan(std::numbers::pi * (u(rng) - 0.5)), loc, predicted_scale});
  }
  return out;
}

std::vector<double> scores_of(const std::vector<ce::NumberForecast>& f) {
  std::vector<double> s;
  for (const auto& x : f) s.push_back(ce::conformal_score(x));
  return s;
}

/// The smallest candidate score q with #{s_i ≤ q} ≥ k: the k-th smallest, by counting.
double brute_force_quantile(const std::vector<double>& scores, std::size_t k) {
  double best = std::numeric_limits<double>::infinity();
  for (double q : scores) {
    std::size_t below = 0;
    for (double s : scores) below += s <= q;
    if (below >= k && q < best) best = q;
  }
  return best;
}

fs::path scratch_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("cq_eval_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("conformal rank k = ⌈(n + 1)·p⌉, exact where (n + 1)·p is an integer, and the fewest numbers per level") {
  CHECK(ce::conformal_rank(9, 0.9) == 9);
  CHECK(ce::conformal_rank(19, 0.95) == 19);
  CHECK(ce::conformal_rank(99, 0.9) == 90);
  CHECK(ce::conformal_rank(100, 0.9) == 91);
  CHECK(ce::conformal_rank(3, 0.5) == 2);
  CHECK(ce::conformal_rank(4, 0.5) == 3);
  CHECK(ce::conformal_min_numbers(0.9) == 9);
  CHECK(ce::conformal_min_numbers(0.95) == 19);
  CHECK(ce::conformal_min_numbers(0.5) == 1);
}

TEST_CASE("conformal multiplier = the ⌈(n+1)p⌉-th smallest score / w(p), against a brute-force quantile") {
  const auto seed = cqtest::test_seed(64001, "conformal multiplier brute force");
  std::mt19937_64 rng(seed);
  for (std::size_t n : {9, 10, 23, 100, 257}) {
    const auto f = cauchy_numbers(rng, n, 1.0, 2.0);
    const auto s = scores_of(f);
    std::vector<double> levels;
    for (double p : {0.5, 0.8, 0.9})
      if (ce::conformal_rank(n, p) <= n) levels.push_back(p);
    const auto m = ce::fit_conformal(s, levels, ce::ForecastFamily::cauchy);
    REQUIRE(m.levels.size() == levels.size());
    for (std::size_t i = 0; i < levels.size(); ++i) {
      const double p = levels[i];
      const std::size_t k = static_cast<std::size_t>(std::ceil((n + 1) * p - 1e-9));
      const double q = brute_force_quantile(s, k);
      INFO("n = ", n, ", p = ", p);
      CHECK(m.levels[i].rank == k);
      CHECK(m.levels[i].score == q);
      CHECK(m.levels[i].multiplier == doctest::Approx(q / std::tan(std::numbers::pi * p / 2)).epsilon(1e-14));
      // loc ± m·scale·w(p) is loc ± s_(k)·scale: exactly k of the scores fall inside
      std::size_t inside = 0;
      for (const auto& x : f)
        inside += std::fabs(x.y - x.loc) <= m.levels[i].multiplier * x.scale * ce::cauchy_half_width(p) * (1 + 1e-12);
      CHECK(inside >= k);
    }
  }
  const auto gaussian = ce::fit_conformal({1.0, 2.0, 3.0}, {0.5}, ce::ForecastFamily::gaussian);
  CHECK(gaussian.levels[0].multiplier == doctest::Approx(2.0 / 0.6744897501960817).epsilon(1e-12));
}

TEST_CASE("too few calibration numbers for a level: refused, naming the level and the numbers it needs") {
  const auto message = cqtest::error_message<cq::DomainError>(
      [] { ce::fit_conformal(std::vector<double>(10, 1.0), {0.5, 0.95}, ce::ForecastFamily::cauchy); });
  CHECK(message.find("level 0.95 needs at least 19 calibration numbers") != std::string::npos);
  CHECK(message.find("got 10") != std::string::npos);
}

TEST_CASE("finite-sample coverage: over many seeds the conformal interval's mean coverage is ≥ p (and = k/(n+1))") {
  const auto seed = cqtest::test_seed(64002, "conformal finite-sample coverage");
  std::mt19937_64 rng(seed);
  constexpr std::size_t trials = 20000, n = 20;
  const double true_scale = 3.0;
  for (double p : {0.5, 0.9}) {
    // the coverage of loc ± q̂·scale for a fresh number is exactly P(|Y − loc| ≤ q̂·scale) =
    // (2/π)·atan(q̂·scale/true_scale): averaged over the calibration draws, no test-set noise
    double total = 0, total_sq = 0;
    for (std::size_t t = 0; t < trials; ++t) {
      const auto cal = cauchy_numbers(rng, n, 1.0, true_scale);
      const auto m = ce::fit_conformal(scores_of(cal), {p}, ce::ForecastFamily::cauchy);
      const double half = m.levels[0].multiplier * ce::cauchy_half_width(p);  // × scale 1
      const double coverage = 2 / std::numbers::pi * std::atan(half / true_scale);
      total += coverage;
      total_sq += coverage * coverage;
    }
    const double mean = total / trials;
    const double se = std::sqrt((total_sq / trials - mean * mean) / trials);
    const double expected = static_cast<double>(ce::conformal_rank(n, p)) / (n + 1);
    MESSAGE("p = ", p, ": mean coverage ", mean, " ± ", se, " over ", trials, " seeds of n = ", n, " (k/(n+1) = ", expected, ")");
    CHECK(mean >= p);
    CHECK(std::fabs(mean - expected) <= 4 * se);
    // without calibration the 3x too narrow intervals cover far less than p
    CHECK(2 / std::numbers::pi * std::atan(ce::cauchy_half_width(p) / true_scale) < p - 0.15);
  }
}

TEST_CASE("temperature: the Cauchy scale MLE recovers a 3x too small scale; the Gaussian's is √(mean r²)") {
  const auto seed = cqtest::test_seed(64003, "temperature");
  std::mt19937_64 rng(seed);
  const auto f = cauchy_numbers(rng, 20000, 1.0, 3.0);
  const auto m = ce::fit_temperature(scores_of(f), ce::ForecastFamily::cauchy);
  REQUIRE(m.temperature);
  MESSAGE("fitted temperature ", *m.temperature, " (true 3)");
  CHECK(*m.temperature == doctest::Approx(3.0).epsilon(0.05));
  // the root of Σ (t² − r²)/(t² + r²)
  double g = 0;
  for (const auto& x : f) {
    const double r = ce::conformal_score(x), t = *m.temperature;
    g += (t * t - r * r) / (t * t + r * r);
  }
  CHECK(std::fabs(g) < 1e-6 * f.size());
  const auto gauss = ce::fit_temperature({1.0, 2.0, 2.0}, ce::ForecastFamily::gaussian);
  CHECK(*gauss.temperature == doctest::Approx(std::sqrt(3.0)));
  CHECK(cqtest::error_message<cq::DomainError>([] { ce::fit_temperature({0.0, 0.0, 1.0}, ce::ForecastFamily::cauchy); })
            .find("predicted exactly") != std::string::npos);
}

TEST_CASE("Mondrian: each group its own multiplier; a small or unseen group falls back to the pooled one") {
  const auto seed = cqtest::test_seed(64004, "mondrian");
  std::mt19937_64 rng(seed);
  auto narrow = cauchy_numbers(rng, 400, 1.0, 1.0), wide = cauchy_numbers(rng, 400, 1.0, 5.0),
       tiny = cauchy_numbers(rng, 10, 1.0, 50.0);
  std::vector<ce::NumberForecast> all;
  std::vector<std::string> groups;
  for (const auto& [set, name] : std::vector<std::pair<const std::vector<ce::NumberForecast>*, std::string>>{
           {&narrow, "narrow"}, {&wide, "wide"}, {&tiny, "tiny"}})
    for (const auto& f : *set) all.push_back(f), groups.push_back(name);
  const auto c = ce::fit_interval_calibration(all, groups, {0.5, 0.9}, ce::CalibrationMethod::conformal,
                                              ce::ForecastFamily::cauchy, 50);
  CHECK(c.groups.count("narrow") == 1);
  CHECK(c.groups.count("wide") == 1);
  CHECK(c.groups.count("tiny") == 0);  // 10 < 50
  const std::string narrow_name = "narrow", wide_name = "wide", tiny_name = "tiny", unseen = "unseen";
  CHECK(c.multiplier(0.9, &narrow_name) == doctest::Approx(1.0).epsilon(0.25));
  CHECK(c.multiplier(0.9, &wide_name) == doctest::Approx(5.0).epsilon(0.25));
  CHECK(c.multiplier(0.9, &tiny_name) == c.multiplier(0.9));
  CHECK(c.multiplier(0.9, &unseen) == c.multiplier(0.9));
  CHECK(cqtest::error_message<cq::DomainError>([&] { (void)c.multiplier(0.8); }).find("no multiplier for level 0.8") !=
        std::string::npos);
  // on fresh numbers of each group, the group's intervals cover about p
  auto fresh_narrow = cauchy_numbers(rng, 4000, 1.0, 1.0), fresh_wide = cauchy_numbers(rng, 4000, 1.0, 5.0);
  for (const auto& [set, name] : std::vector<std::pair<const std::vector<ce::NumberForecast>*, const std::string*>>{
           {&fresh_narrow, &narrow_name}, {&fresh_wide, &wide_name}}) {
    const auto s = ce::score_forecasts(*set, ce::ForecastFamily::cauchy, {0.5, 0.9}, std::nullopt, &c, name);
    INFO(*name);
    CHECK(*s.levels[0].coverage == doctest::Approx(0.5).epsilon(0.1));
    CHECK(*s.levels[1].coverage == doctest::Approx(0.9).epsilon(0.03));
  }
}

TEST_CASE("calibrated on one split, evaluated on a disjoint one: coverage near nominal, interval score improved") {
  const auto seed = cqtest::test_seed(64005, "disjoint splits");
  std::mt19937_64 rng(seed);
  const auto cal = cauchy_numbers(rng, 1000, 1.0, 2.5), test = cauchy_numbers(rng, 5000, 1.0, 2.5);
  const std::vector<double> levels{0.5, 0.8, 0.9, 0.95};
  for (auto method : {ce::CalibrationMethod::conformal, ce::CalibrationMethod::temperature}) {
    const auto c = ce::fit_interval_calibration(cal, {}, levels, method, ce::ForecastFamily::cauchy);
    const auto before = ce::score_forecasts(test, ce::ForecastFamily::cauchy, levels, 0.0);
    const auto after = ce::score_forecasts(test, ce::ForecastFamily::cauchy, levels, 0.0, &c);
    CHECK(after.calibrated);
    CHECK_FALSE(before.calibrated);
    for (std::size_t i = 0; i < levels.size(); ++i) {
      INFO(ce::method_name(method), " level ", levels[i], ": coverage ", *before.levels[i].coverage, " -> ",
           *after.levels[i].coverage, ", interval score ", *before.levels[i].interval_score, " -> ",
           *after.levels[i].interval_score);
      CHECK(std::fabs(*after.levels[i].coverage - levels[i]) < 0.03);
      CHECK(*before.levels[i].coverage < levels[i] - 0.05);
      CHECK(*after.levels[i].interval_score < *before.levels[i].interval_score);
    }
    // the scores that do not depend on the intervals are the same
    CHECK(*after.crps.mean == *before.crps.mean);
    CHECK(*after.nll.mean == *before.nll.mean);
  }
}

TEST_CASE("score_forecasts of a Gaussian head by hand on three numbers, and of true Gaussian draws") {
  const std::vector<ce::NumberForecast> f{{0.5, 0.0, 1.0}, {-2.0, 0.0, 0.5}, {10.0, 9.0, 2.0}};
  const auto s = ce::score_forecasts(f, ce::ForecastFamily::gaussian, {0.5}, 1.0);
  const auto Phi = [](double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); };
  const auto phi = [](double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi); };
  double nll = 0;
  std::vector<double> crps;
  for (const auto& n : f) {
    const double z = (n.y - n.loc) / n.scale;
    nll += 0.5 * std::log(2 * std::numbers::pi) + std::log(n.scale) + 0.5 * z * z;
    crps.push_back(n.scale * (z * (2 * Phi(z) - 1) + 2 * phi(z) - 1 / std::sqrt(std::numbers::pi)));
  }
  CHECK(s.family == ce::ForecastFamily::gaussian);
  CHECK(*s.nll.mean == doctest::Approx(nll / 3).epsilon(1e-12));
  CHECK(*s.crps.mean == doctest::Approx((crps[0] + crps[1] + crps[2]) / 3).epsilon(1e-12));
  std::sort(crps.begin(), crps.end());
  CHECK(*s.crps.median == doctest::Approx(crps[1]).epsilon(1e-12));
  CHECK(*s.mae == doctest::Approx(3.5 / 3));
  // the 50 % intervals loc ± σ·Φ⁻¹(0.75): [−0.674, 0.674] holds 0.5, [−0.337, 0.337] misses −2 by
  // 1.663, [7.651, 10.349] holds 10
  const double w = 0.6744897501960817;
  CHECK(*s.levels[0].coverage == doctest::Approx(2.0 / 3));
  const double is = (2 * w + (w + 4 * (2 - 0.5 * w)) + 4 * w) / 3;
  CHECK(*s.levels[0].interval_score == doctest::Approx(is).epsilon(1e-12));
  double pinball = 0;
  for (const auto& n : f) pinball += ce::gaussian_mean_pinball(n.y, n.loc, n.scale);
  CHECK(*s.mean_pinball == doctest::Approx(pinball / 3));
  CHECK(ce::proper_scores_to_json(s)["distribution"] == "gaussian");

  const auto seed = cqtest::test_seed(64006, "gaussian draws scored");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<ce::NumberForecast> draws;
  for (int i = 0; i < 20000; ++i) {
    const double loc = 5 * normal(rng), scale = 0.5 + std::fabs(normal(rng));
    draws.push_back({loc + scale * normal(rng), loc, scale});
  }
  const auto g = ce::score_forecasts(draws, ce::ForecastFamily::gaussian, {0.5, 0.9}, std::nullopt);
  const auto c = ce::score_forecasts(draws, ce::ForecastFamily::cauchy, {0.5, 0.9}, std::nullopt);
  for (std::size_t i = 0; i < 2; ++i) {
    const double p = g.levels[i].level, se = std::sqrt(p * (1 - p) / 20000);
    INFO("level ", p, ": coverage ", *g.levels[i].coverage);
    CHECK(std::fabs(*g.levels[i].coverage - p) < 3 * se);
    // the true distribution scores better than the wrong reading of the same (loc, scale)
    CHECK(*g.levels[i].interval_score < *c.levels[i].interval_score);
  }
  CHECK(*g.nll.mean < *c.nll.mean);
  CHECK(*g.crps.mean < *c.crps.mean);
}

TEST_CASE("score_forecasts by hand on three numbers, with a baseline, and a point forecast") {
  const std::vector<ce::NumberForecast> f{{0.5, 0.0, 1.0}, {-2.0, 0.0, 0.5}, {10.0, 9.0, 2.0}};
  const auto s = ce::score_forecasts(f, ce::ForecastFamily::cauchy, {0.5}, 1.0);
  CHECK(s.numbers == 3);
  CHECK(*s.mae == doctest::Approx((0.5 + 2 + 1) / 3.0));
  CHECK(*s.rmse == doctest::Approx(std::sqrt((0.25 + 4 + 1) / 3.0)));
  // CRPS 0.518, 1.457, 1.035: the median is the third
  const double crps[] = {ce::cauchy_crps(0.5, 0.0, 1.0), ce::cauchy_crps(-2.0, 0.0, 0.5), ce::cauchy_crps(10.0, 9.0, 2.0)};
  CHECK(*s.crps.mean == doctest::Approx((crps[0] + crps[1] + crps[2]) / 3));
  CHECK(*s.crps.median == doctest::Approx(crps[2]));
  CHECK(*s.crps.median == doctest::Approx(4 / std::numbers::pi * (0.5 * std::atan(0.5) - 0.5 * std::log(1.25) + std::log(2.0))));
  // the 50% intervals: [−1, 1] (0.5 inside), [−0.5, 0.5] (−2 below by 1.5), [7, 11] (inside)
  CHECK(*s.levels[0].coverage == doctest::Approx(2.0 / 3));
  const double is = (2 + (1 + 4 * 1.5) + 4) / 3.0;
  CHECK(*s.levels[0].interval_score == doctest::Approx(is));
  // baseline c = 1: |y − c| = 0.5, 3, 9
  CHECK(*s.baseline_mae == doctest::Approx(12.5 / 3));
  CHECK(*s.baseline_crps.median == doctest::Approx(3));
  CHECK(*s.levels[0].baseline_interval_score == doctest::Approx(4 * 12.5 / 3));
  CHECK(*s.mae_skill == doctest::Approx(1 - 3.5 / 12.5));
  CHECK(*s.levels[0].skill == doctest::Approx(1 - is / (50.0 / 3)));
  const auto point = ce::score_forecasts(f, ce::ForecastFamily::point, {0.5}, 1.0);
  CHECK(point.levels.empty());
  CHECK(*point.crps.mean == doctest::Approx(*point.mae));
  CHECK(ce::proper_scores_to_json(point)["nll"].is_null());
  const auto j = ce::proper_scores_to_json(s);
  CHECK(j["crps"]["median"].get<double>() == doctest::Approx(*s.crps.median));
  CHECK(j["levels"][0]["interval_score"].get<double>() == doctest::Approx(is));
  CHECK(j["skill"]["mae"].get<double>() == doctest::Approx(*s.mae_skill));
}

TEST_CASE("calibration.json: round trip through a model directory, and strict reading") {
  const auto seed = cqtest::test_seed(64006, "calibration round trip");
  std::mt19937_64 rng(seed);
  auto f = cauchy_numbers(rng, 300, 1.0, 2.0);
  std::vector<std::string> groups;
  for (std::size_t i = 0; i < f.size(); ++i) groups.push_back(i % 3 ? "a" : "b");
  const auto dir = scratch_dir("roundtrip");
  CHECK_FALSE(ce::load_interval_calibration(dir).has_value());
  for (auto method : {ce::CalibrationMethod::conformal, ce::CalibrationMethod::temperature}) {
    auto c = ce::fit_interval_calibration(f, groups, {0.5, 0.9}, method, ce::ForecastFamily::cauchy, 50);
    c.data = "cal.jsonl";
    ce::save_interval_calibration(c, dir);
    const auto back = ce::load_interval_calibration(dir);
    REQUIRE(back);
    CHECK(back->method == c.method);
    CHECK(back->data == "cal.jsonl");
    CHECK(back->groups.size() == 2);
    const std::string a = "a";
    for (double p : {0.5, 0.9}) {
      CHECK(back->multiplier(p) == c.multiplier(p));
      CHECK(back->multiplier(p, &a) == c.multiplier(p, &a));
    }
    CHECK(ce::interval_calibration_to_json(*back) == ce::interval_calibration_to_json(c));
  }
  const auto good = ce::interval_calibration_to_json(
      ce::fit_interval_calibration(f, {}, {0.5, 0.9}, ce::CalibrationMethod::conformal, ce::ForecastFamily::cauchy));
  const auto refused = [&](nlohmann::json j, const std::string& expected) {
    std::ofstream(dir / "calibration.json") << j.dump();
    const auto message = cqtest::error_message<cq::FormatError>([&] { (void)ce::load_interval_calibration(dir); });
    INFO(message);
    CHECK(message.find("calibration.json") != std::string::npos);
    CHECK(message.find(expected) != std::string::npos);
  };
  auto j = good;
  j["format"] = "other";
  refused(j, "field 'format' must be \"causalqwen-interval-calibration-1\"");
  j = good;
  j["extra"] = 1;
  refused(j, "unknown field 'extra'");
  j = good;
  j.erase("pooled");
  refused(j, "pooled");
  j = good;
  j["pooled"]["levels"][1]["level"] = 1.5;
  refused(j, "pooled.levels[1].level must lie in (0, 1)");
  j = good;
  j["pooled"]["levels"][0]["multiplier"] = -1;
  refused(j, "pooled.levels[0].multiplier must be a finite number > 0");
  j = good;
  j["pooled"]["levels"][0]["multiplier"] = "big";
  refused(j, "pooled.levels[0].multiplier");
  j = good;
  j["method"] = "isotonic";
  refused(j, "field 'method' must be \"conformal\" or \"temperature\"");
  std::ofstream(dir / "calibration.json") << "{not json";
  CHECK(cqtest::error_message<cq::FormatError>([&] { (void)ce::load_interval_calibration(dir); }).find("not valid JSON") !=
        std::string::npos);
  fs::remove_all(dir);
}
