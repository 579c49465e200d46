// eval/calibration.hpp and the calibration part of evaluate():
// the report of a tiny model's evaluation against the same statistics computed by hand from
// the head's outputs (overall and per group); true Cauchy draws judged calibrated, with halved
// and doubled scales judged over- and under-confident; ECE of calibrated and miscalibrated
// confidences; <NUM> precision/recall/F1 of a hand-made confusion; the JSON round trip
// and empty or invalid input (the SVG picture: tests/tools/causalqwen/test_calibration_svg.cpp).
#include <causalqwen/eval/calibration.hpp>
#include <causalqwen/train/corpus_batch_source.hpp>
#include <causalqwen/train/evaluate.hpp>
#include <causalqwen/train/token_corpus.hpp>
#include <doctest/doctest.h>
#include <fmt/ranges.h>

#include "../support/test_support.hpp"
#include "../support/calibration_samples.hpp"
#include "../train/tiny_sources.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace ce = causalqwen::eval;

namespace {

using cqtest::NumberSample;

/// One position with a label, as the head left it.
struct TokenSample {
  std::int64_t predicted, label;
  double confidence, prob_sum;
};

/// The median by sorting: the middle value or the mean of the two middle values.
double sorted_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// |actual − expected| ≤ 1e-12·max(|expected|, 1); a missing value fails.
void check_close(std::optional<double> actual, double expected, const char* what) {
  INFO(what, ": expected ", expected);
  REQUIRE(actual.has_value());
  CHECK(cqtest::close_rel(*actual, expected, 1e-12));
}

/// Every number statistic recomputed from the samples with the textbook formulas.
void check_numbers_by_hand(const ce::NumberCalibrationReport& r, const std::vector<NumberSample>& samples,
                           std::optional<double> baseline) {
  const std::size_t n = samples.size();
  REQUIRE(r.numbers == n);
  REQUIRE(n > 0);
  std::vector<double> errors, baseline_errors, scales;
  double nll = 0;
  std::vector<std::size_t> inside(4, 0), pit(10, 0);
  for (const auto& s : samples) {
    errors.push_back(std::fabs(s.loc - s.y));
    if (baseline) baseline_errors.push_back(std::fabs(*baseline - s.y));
    scales.push_back(s.scale);
    const double z = (s.y - s.loc) / s.scale;
    nll += std::log(std::numbers::pi * s.scale) + std::log1p(z * z);
    for (std::size_t i = 0; i < 4; ++i)
      inside[i] += std::fabs(s.y - s.loc) <= s.scale * std::tan(std::numbers::pi * ce::coverage_levels[i] / 2);
    const double u = 0.5 + std::atan(z) / std::numbers::pi;
    ++pit[std::min<std::size_t>(static_cast<std::size_t>(u * 10), 9)];
  }
  double sum_errors = 0, sum_baseline = 0;
  for (double e : errors) sum_errors += e;
  for (double e : baseline_errors) sum_baseline += e;
  const double nd = static_cast<double>(n);
  check_close(r.mae, sum_errors / nd, "mae");
  check_close(r.median_abs_error, sorted_median(errors), "median_abs_error");
  check_close(r.mean_nll, nll / nd, "mean_nll");
  REQUIRE(r.baseline.has_value() == baseline.has_value());
  if (baseline) {
    CHECK(r.baseline->value == *baseline);
    check_close(r.baseline->mae, sum_baseline / nd, "baseline mae");
    check_close(r.baseline->median_abs_error, sorted_median(baseline_errors), "baseline median");
    check_close(r.baseline->mae_ratio, sum_errors / sum_baseline, "mae ratio");
    check_close(r.baseline->median_abs_error_ratio, sorted_median(errors) / sorted_median(baseline_errors), "median ratio");
  }
  for (std::size_t i = 0; i < 4; ++i) {
    const double p = ce::coverage_levels[i];
    const auto& c = r.intervals[i];
    INFO("level ", p);
    CHECK(c.nominal == p);
    CHECK(c.inside == inside[i]);
    check_close(c.coverage, static_cast<double>(inside[i]) / nd, "coverage");
    check_close(c.standard_error, std::sqrt(p * (1 - p) / nd), "standard error");
    std::vector<double> widths;
    for (double s : scales) widths.push_back(2 * s * std::tan(std::numbers::pi * p / 2));
    check_close(c.median_width, sorted_median(widths), "median width");
    const double se = std::sqrt(p * (1 - p) / nd), coverage = static_cast<double>(inside[i]) / nd;
    const auto verdict = coverage < p - 2 * se   ? ce::CoverageVerdict::over_confident
                         : coverage > p + 2 * se ? ce::CoverageVerdict::under_confident
                                                 : ce::CoverageVerdict::calibrated;
    CHECK(c.verdict == verdict);
  }
  double chi_square = 0;
  for (std::size_t b = 0; b < 10; ++b) {
    CHECK(r.pit_counts[b] == pit[b]);
    chi_square += std::pow(static_cast<double>(pit[b]) - nd / 10, 2) / (nd / 10);
  }
  check_close(r.pit_chi_square, chi_square, "pit chi-square");
}

/// Every token statistic recomputed from the samples.
void check_tokens_by_hand(const ce::TokenCalibrationReport& r, const std::vector<TokenSample>& samples,
                          std::int64_t num_id) {
  const std::size_t n = samples.size();
  REQUIRE(r.positions == n);
  REQUIRE(n > 0);
  std::size_t correct = 0, tp = 0, predicted = 0, labels = 0;
  double prob_sum = 0;
  std::vector<std::size_t> count(10, 0), hits(10, 0);
  std::vector<double> confidence(10, 0.0);
  for (const auto& s : samples) {
    correct += s.predicted == s.label;
    tp += s.predicted == num_id && s.label == num_id;
    predicted += s.predicted == num_id;
    labels += s.label == num_id;
    prob_sum += s.prob_sum;
    const auto b = std::min<std::size_t>(static_cast<std::size_t>(s.confidence * 10), 9);
    ++count[b];
    hits[b] += s.predicted == s.label;
    confidence[b] += s.confidence;
  }
  const double nd = static_cast<double>(n);
  CHECK(r.correct == correct);
  check_close(r.accuracy, static_cast<double>(correct) / nd, "accuracy");
  CHECK(r.num_true_positives == tp);
  CHECK(r.num_predicted == predicted);
  CHECK(r.num_labels == labels);
  if (predicted) check_close(r.num_precision, double(tp) / double(predicted), "precision");
  if (labels) check_close(r.num_recall, double(tp) / double(labels), "recall");
  check_close(r.mean_prob_sum, prob_sum / nd, "mean prob sum");
  double ece = 0;
  for (std::size_t b = 0; b < 10; ++b) {
    CHECK(r.reliability[b].count == count[b]);
    CHECK(r.reliability[b].hits == hits[b]);
    if (!count[b]) {
      CHECK_FALSE(r.reliability[b].accuracy.has_value());
      continue;
    }
    const double acc = double(hits[b]) / double(count[b]), conf = confidence[b] / double(count[b]);
    check_close(r.reliability[b].accuracy, acc, "bin accuracy");
    check_close(r.reliability[b].mean_confidence, conf, "bin confidence");
    ece += double(count[b]) / nd * std::fabs(acc - conf);
  }
  check_close(r.ece, ece, "ece");
}

/// n draws y ~ Cauchy(loc_i, scale_i) with loc_i ~ N(0, 3²), scale_i = exp(U(−1, 1)).
std::vector<NumberSample> cauchy_draws(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::uniform_real_distribution<double> log_scale(-1.0, 1.0), u01(0.0, 1.0);
  std::vector<NumberSample> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double loc = normal(rng), scale = std::exp(log_scale(rng));
    double u = 0;
    while (u == 0.0) u = u01(rng);
    out.push_back({cq::raw::sample(u, loc, scale), loc, scale});
  }
  return out;
}

/// The number statistics of `draws` with every scale multiplied by `scale_factor`.
ce::NumberCalibrationReport number_report(const std::vector<NumberSample>& draws, double scale_factor) {
  ce::NumberCalibration calibration;
  for (const auto& d : draws) calibration.add(d.y, d.loc, d.scale * scale_factor);
  return calibration.report();
}

}  // namespace

TEST_CASE_TEMPLATE("evaluate: the calibration report equals the statistics computed by hand, overall and per group", T,
                   float, double) {
  const auto seed = cqtest::test_seed(13, "calibration by hand");
  const auto cfg = cqtest::tiny_config();
  cq::model::CausalQwen<T> model(cfg);
  model.init_random(seed);
  cqtest::CountingTokenSource<T> counting(3, 9, 11, 11);
  std::vector<cq::train::BatchData<T>> batches;
  for (int k = 0; k < 3; ++k) batches.push_back(counting.next());
  const double baseline = 4.0;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < 9; ++i) names.push_back(i % 3 == 1 ? "middle rows" : "outer rows");

  // by hand: the head's outputs at every position with a label, and their group
  std::vector<NumberSample> numbers;
  std::vector<TokenSample> tokens;
  std::map<std::string, std::vector<NumberSample>> group_numbers;
  std::map<std::string, std::vector<TokenSample>> group_tokens;
  double cache_nll = 0;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto& b = batches[k];
    typename cq::model::CausalQwen<T>::Cache cache;
    model.evaluate(b.view(), cache);
    const auto& h = cache.head;
    const auto full = model.head().full_vocabulary(model.evaluation_head_params(), h);
    const std::size_t K = cfg.num_classes;
    for (std::size_t r = 0; r < b.batch; ++r)
      for (std::size_t s = 0; s < b.seq; ++s) {
        const std::size_t m = r * b.seq + s;
        if (b.labels[m] == -100) continue;
        // the head's argmax and max P agree with the full table of P_k
        std::size_t best = 0;
        for (std::size_t c = 1; c < K; ++c)
          if (full.P[m * K + c] > full.P[m * K + best]) best = c;
        CHECK(h.ovr.pred[m] == static_cast<std::int64_t>(best));
        CHECK(cqtest::close_rel(h.ovr.max_prob[m], full.P[m * K + best], 64 * std::numeric_limits<T>::epsilon(), 0.0));
        const std::string& group = names[k * 3 + r];
        const TokenSample t{h.ovr.pred[m], b.labels[m], double(h.ovr.max_prob[m]), double(h.ovr.prob_sum[m])};
        tokens.push_back(t);
        group_tokens[group].push_back(t);
        if (b.labels[m] != cfg.num_token_id) continue;
        const NumberSample n{double(b.target_values[m]), double(h.regression.loc_Y[m]), double(h.regression.scale_Y[m])};
        numbers.push_back(n);
        group_numbers[group].push_back(n);
        cache_nll += double(h.regression.nll[m]);
      }
  }
  REQUIRE(!numbers.empty());

  std::vector<ct::SequenceIndex> asked;
  ct::EvaluationOptions options;
  options.baseline_value = baseline;
  options.group_of = [&](const ct::SequenceIndex& at) {
    asked.push_back(at);
    return ct::group_by_sequence(names)(at);
  };
  std::vector<std::pair<std::size_t, std::size_t>> progress;  // (done, total) after each batch
  options.on_batch = [&](std::size_t done, std::size_t total) { progress.emplace_back(done, total); };
  const auto e = ct::evaluate(model, batches, {}, options);
  CHECK(progress == std::vector<std::pair<std::size_t, std::size_t>>{{1, 3}, {2, 3}, {3, 3}});
  const auto& report = e.calibration;
  check_numbers_by_hand(report.overall.numbers, numbers, baseline);
  check_tokens_by_hand(report.overall.tokens, tokens, cfg.num_token_id);
  CHECK(report.overall.numbers.numbers == e.numbers);
  // the head's own NLL, summed in T, is the same mean to T's precision
  CHECK(cqtest::close_rel(*report.overall.numbers.mean_nll, cache_nll / double(numbers.size()),
                          64 * std::numeric_limits<T>::epsilon()));
  // the groups: each by hand, and the group of every sequence asked once, in order
  REQUIRE(report.groups.size() == 2);
  for (const auto& [name, statistics] : report.groups) {
    INFO("group ", name);
    check_numbers_by_hand(statistics.numbers, group_numbers.at(name), baseline);
    check_tokens_by_hand(statistics.tokens, group_tokens.at(name), cfg.num_token_id);
  }
  REQUIRE(asked.size() == 9);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    CHECK(asked[i].sequence == i);
    CHECK(asked[i].batch == i / 3);
    CHECK(asked[i].row == i % 3);
  }
  // without options: the same overall statistics, no baseline and no groups
  const auto plain = ct::evaluate(model, batches);
  CHECK(plain.calibration.groups.empty());
  CHECK_FALSE(plain.calibration.overall.numbers.baseline.has_value());
  CHECK(plain.calibration.overall.numbers.mae == report.overall.numbers.mae);
  CHECK(plain.calibration.overall.tokens.ece == report.overall.tokens.ece);
  // a group list too short for the sequences is an error naming the sequence
  ct::EvaluationOptions short_list;
  short_list.group_of = ct::group_by_sequence({"a", "b"});
  CHECK(cqtest::error_message<cq::DomainError>([&] { ct::evaluate(model, batches, {}, short_list); }) ==
        "causalqwen::group_by_sequence: sequence 2 has no group: only 2 groups given");
}

TEST_CASE("number statistics of true Cauchy draws: calibrated; halved scales over-confident, doubled under-confident") {
  // With the true distributions each level's verdict is "calibrated" with probability ≈ 0.95
  // (the 2-standard-error rule): the fixed seed is one where all four are; other seeds may
  // flag a level now and then, the 3-standard-error and chi-square bounds far more rarely.
  const auto seed = cqtest::test_seed(20261130, "calibration of true Cauchy draws");
  const auto draws = cauchy_draws(20000, seed);
  const auto truth = number_report(draws, 1.0);
  REQUIRE(truth.numbers == 20000);
  for (const auto& c : truth.intervals) {
    INFO("level ", c.nominal, " coverage ", *c.coverage);
    const double se = std::sqrt(c.nominal * (1 - c.nominal) / 20000.0);
    CHECK(*c.standard_error == doctest::Approx(se));
    CHECK(std::fabs(*c.coverage - c.nominal) <= 3 * se);
    CHECK(c.verdict == ce::CoverageVerdict::calibrated);
  }
  // PIT of the true model: χ² with 9 degrees of freedom, whose 0.999 quantile is 27.88
  INFO("PIT counts of the true model: ", fmt::format("{}", fmt::join(truth.pit_counts, " ")));
  CHECK(*truth.pit_chi_square < 27.88);

  const auto halved = number_report(draws, 0.5), doubled = number_report(draws, 2.0);
  for (std::size_t i = 0; i < ce::coverage_levels.size(); ++i) {
    INFO("level ", ce::coverage_levels[i]);
    CHECK(halved.intervals[i].verdict == ce::CoverageVerdict::over_confident);
    CHECK(doubled.intervals[i].verdict == ce::CoverageVerdict::under_confident);
    CHECK(*halved.intervals[i].median_width == doctest::Approx(*truth.intervals[i].median_width / 2));
    // the expected coverage with scales multiplied by f: P(|Z| ≤ f·w_p) = (2/π)·atan(f·tan(π·p/2))
    const double w = std::tan(std::numbers::pi * ce::coverage_levels[i] / 2);
    CHECK(*halved.intervals[i].coverage == doctest::Approx(2 / std::numbers::pi * std::atan(w / 2)).epsilon(0.03));
    CHECK(*doubled.intervals[i].coverage == doctest::Approx(2 / std::numbers::pi * std::atan(2 * w)).epsilon(0.03));
  }
  CHECK(*halved.pit_chi_square > 1000);   // too many targets in the outer bins
  CHECK(*doubled.pit_chi_square > 1000);  // too many in the middle
  CHECK(*halved.mean_nll > *truth.mean_nll);
  CHECK(*doubled.mean_nll > *truth.mean_nll);
  CHECK(halved.mae == truth.mae);  // the scale does not move the point prediction
}

TEST_CASE("number statistics of a Gaussian head: true Gaussian draws calibrated; a point head has errors only") {
  const auto seed = cqtest::test_seed(20261131, "calibration of true Gaussian draws");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> scales(0.2, 5.0);
  ce::NumberCalibration gaussian(std::nullopt, cq::model::RegHead::gaussian), cauchy;
  double nll = 0;
  constexpr std::size_t n = 20000;
  for (std::size_t i = 0; i < n; ++i) {
    const double loc = 3.0 * normal(rng), scale = scales(rng), y = loc + scale * normal(rng);
    gaussian.add(y, loc, scale);
    cauchy.add(y, loc, scale);
    const double z = (y - loc) / scale;
    nll += 0.5 * std::log(2 * std::numbers::pi) + std::log(scale) + 0.5 * z * z;
  }
  const auto r = gaussian.report();
  CHECK(r.head == cq::model::RegHead::gaussian);
  CHECK(*r.mean_nll == doctest::Approx(nll / n).epsilon(1e-12));
  for (const auto& c : r.intervals) {
    INFO("level ", c.nominal, " coverage ", *c.coverage);
    CHECK(std::fabs(*c.coverage - c.nominal) <= 3 * *c.standard_error);
    CHECK(c.verdict == ce::CoverageVerdict::calibrated);
  }
  INFO("PIT counts: ", fmt::format("{}", fmt::join(r.pit_counts, " ")));
  CHECK(*r.pit_chi_square < 27.88);  // χ² with 9 d.o.f.: its 0.999 quantile
  // the same draws read as Cauchy: the 50 % intervals (±scale) are too wide, the PIT far from flat
  const auto as_cauchy = cauchy.report();
  CHECK(*as_cauchy.intervals[0].coverage > 0.6);
  CHECK(*as_cauchy.pit_chi_square > 1000);

  ce::NumberCalibration point(1.0, cq::model::RegHead::mse);
  point.add(0.5, 0.0, 1.0);
  point.add(-2.0, 0.0, 0.5);
  point.add(10.0, 9.0, 2.0);
  const auto p = point.report();
  CHECK(p.head == cq::model::RegHead::mse);
  CHECK(p.numbers == 3);
  CHECK(*p.mae == doctest::Approx(3.5 / 3));
  CHECK(*p.baseline->mae == doctest::Approx(12.5 / 3));
  CHECK_FALSE(p.mean_nll.has_value());
  CHECK_FALSE(p.pit_chi_square.has_value());
  for (const auto& c : p.intervals) {
    CHECK_FALSE(c.coverage.has_value());
    CHECK_FALSE(c.median_width.has_value());
    CHECK_FALSE(c.verdict.has_value());
  }
  // the reading is in the JSON ("distribution") and comes back; a report without it is Cauchy
  for (const auto& report : {r, p}) {
    ce::CalibrationReport whole;
    whole.overall.numbers = report;
    auto j = ce::calibration_to_json(whole);
    CHECK(j["overall"]["numbers"]["distribution"] == std::string(cq::model::reg_head_name(report.head)));
    CHECK(ce::calibration_from_json(j, "test").overall.numbers.head == report.head);
    j["overall"]["numbers"].erase("distribution");
    CHECK(ce::calibration_from_json(j, "test").overall.numbers.head == cq::model::RegHead::cauchy);
    j["overall"]["numbers"]["distribution"] = "laplace";
    CHECK(cqtest::error_message<cq::FormatError>([&] { ce::calibration_from_json(j, "test.json"); })
              .find("test.json: overall.numbers.distribution must be \"cauchy\", \"gaussian\" or \"mse\", got \"laplace\"") !=
          std::string::npos);
  }
}

TEST_CASE("evaluate through a model whose head predicts the true Cauchy: calibrated; with its scale halved, over-confident") {
  // w_reg = 0 makes loc_Y = b_reg and scale_Y = scale_Y_floor at every position, whatever the
  // backbone computes: the model's head then predicts Cauchy(b_reg, floor) for every number.
  // The targets are drawn from Cauchy(3, 2); the fixed seed is one where all four levels of the
  // true head are within 2 standard errors (each is with probability ≈ 0.95).
  const auto seed = cqtest::test_seed(20261124, "model head at the true Cauchy");
  constexpr double true_loc = 3.0, true_scale = 2.0;
  constexpr std::size_t rows = 320, seq = 64;
  const auto cfg = cqtest::tiny_config();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  ct::TokenCorpus corpus;
  corpus.num_id = cfg.num_token_id;
  for (std::size_t r = 0; r < rows; ++r) {  // every token a <NUM>: every label a number
    const std::vector<cq::text::TokenId> ids(seq + 1, static_cast<cq::text::TokenId>(cfg.num_token_id));
    std::vector<double> values;
    for (std::size_t i = 0; i <= seq; ++i) {
      double u = 0;
      while (u == 0.0) u = u01(rng);
      values.push_back(cq::raw::sample(u, true_loc, true_scale));
    }
    corpus.add(ids, values);
  }
  const auto batches = ct::evaluation_batches<double>(corpus, 32, seq);
  const auto report_with = [&](double scale) {
    auto c = cfg;
    c.scale_Y_floor = scale;
    cq::model::CausalQwen<double> model(c);
    model.init_random(seed);
    for (auto& w : model.params().slot_span(cq::model::names::reg_w)) w = 0;
    model.params().slot_span(cq::model::names::reg_b)[0] = true_loc;
    model.params().touch();
    const auto e = ct::evaluate(model, batches);
    CHECK(e.non_finite == 0);
    return e.calibration.overall.numbers;
  };
  const auto truth = report_with(true_scale);
  REQUIRE(truth.numbers == rows * seq);
  for (const auto& c : truth.intervals) {
    INFO("level ", c.nominal, " coverage ", *c.coverage);
    CHECK(c.verdict == ce::CoverageVerdict::calibrated);
    CHECK(*c.median_width == doctest::Approx(2 * true_scale * std::tan(std::numbers::pi * c.nominal / 2)));
  }
  INFO("PIT counts of the true head: ", fmt::format("{}", fmt::join(truth.pit_counts, " ")));
  CHECK(*truth.pit_chi_square < 27.88);  // the 0.999 quantile of χ² with 9 degrees of freedom
  const auto halved = report_with(true_scale / 2);
  for (const auto& c : halved.intervals) {
    INFO("level ", c.nominal, " coverage ", *c.coverage);
    CHECK(c.verdict == ce::CoverageVerdict::over_confident);
  }
  CHECK(*halved.mean_nll > *truth.mean_nll);
}

TEST_CASE("the coverage verdict at the 2-standard-error boundaries") {
  // p = 0.8, n = 400: se = 0.02, so the band is [0.76, 0.84]
  CHECK(ce::coverage_verdict(0.7599, 0.8, 400) == ce::CoverageVerdict::over_confident);
  CHECK(ce::coverage_verdict(0.7601, 0.8, 400) == ce::CoverageVerdict::calibrated);
  CHECK(ce::coverage_verdict(0.8399, 0.8, 400) == ce::CoverageVerdict::calibrated);
  CHECK(ce::coverage_verdict(0.8401, 0.8, 400) == ce::CoverageVerdict::under_confident);
  CHECK(ce::verdict_name(ce::CoverageVerdict::over_confident) == "over-confident");
  CHECK(ce::verdict_name(ce::CoverageVerdict::under_confident) == "under-confident");
  CHECK(ce::verdict_name(ce::CoverageVerdict::calibrated) == "calibrated");
  CHECK(ce::interval_half_width(0.5) == doctest::Approx(1.0));
  CHECK(ce::interval_half_width(0.95) == doctest::Approx(std::tan(std::numbers::pi * 0.475)));
}

TEST_CASE("median: the middle value, the midpoint of the two middle ones, none of nothing") {
  CHECK(ce::median({3.0, -1.0, 2.0}) == 2.0);
  CHECK(ce::median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(ce::median({5.0}) == 5.0);
  CHECK_FALSE(ce::median({}).has_value());
}

TEST_CASE("ECE: near 0 for calibrated confidences, large for over-confident ones, exact on a hand-made table") {
  const auto seed = cqtest::test_seed(77, "calibration ECE");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  ce::TokenCalibration calibrated(5), over_confident(5);
  constexpr std::size_t n = 50000;
  for (std::size_t i = 0; i < n; ++i) {
    const double confidence = u01(rng), draw = u01(rng);
    // a hit (predicted = label = 1) with probability confidence, or confidence²
    calibrated.add(1, draw < confidence ? 1 : 2, confidence, 1.0);
    over_confident.add(1, draw < confidence * confidence ? 1 : 2, confidence, 1.0);
  }
  const auto good = calibrated.report(), bad = over_confident.report();
  INFO("ECE calibrated ", *good.ece, ", over-confident ", *bad.ece);
  CHECK(*good.ece < 0.02);
  CHECK(*bad.ece == doctest::Approx(1.0 / 6).epsilon(0.1));  // ∫ (c − c²) dc = 1/6
  for (std::size_t b = 0; b < ce::reliability_bin_count; ++b) {
    const auto& bin = good.reliability[b];
    INFO("bin ", b, " count ", bin.count);
    REQUIRE(bin.count > 0);
    const double se = std::sqrt(*bin.mean_confidence * (1 - *bin.mean_confidence) / double(bin.count));
    CHECK(std::fabs(*bin.accuracy - *bin.mean_confidence) < 4 * se + 1e-3);
    CHECK(*bad.reliability[b].accuracy < *bad.reliability[b].mean_confidence);
  }

  // by hand: bin 9 holds 0.95 (hit) and 0.97 (miss), bin 3 holds 0.35 (hit) and 0.32 (miss)
  //   ECE = 2/4·|0.5 − 0.96| + 2/4·|0.5 − 0.335| = 0.23 + 0.0825 = 0.3125
  ce::TokenCalibration table(5);
  table.add(3, 3, 0.95, 1.2);
  table.add(3, 4, 0.97, 1.4);
  table.add(2, 2, 0.35, 0.6);
  table.add(2, 1, 0.32, 0.8);
  const auto r = table.report();
  CHECK(*r.ece == doctest::Approx(0.3125).epsilon(1e-14));
  CHECK(*r.accuracy == 0.5);
  CHECK(*r.mean_prob_sum == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(r.reliability[9].count == 2);
  CHECK(r.reliability[9].hits == 1);
  CHECK(*r.reliability[9].mean_confidence == doctest::Approx(0.96).epsilon(1e-15));
  CHECK(r.reliability[3].count == 2);
  CHECK(r.reliability[0].count == 0);
  CHECK_FALSE(r.reliability[0].accuracy.has_value());
  // a confidence of exactly 1 lands in the last bin
  table.add(1, 1, 1.0, 1.0);
  CHECK(table.report().reliability[9].count == 3);
}

TEST_CASE("<NUM> precision, recall and F1 on a hand-made confusion") {
  constexpr std::int64_t num = 7;
  ce::TokenCalibration confusion(num);
  for (int i = 0; i < 3; ++i) confusion.add(num, num, 0.9, 1);  // true positives
  for (int i = 0; i < 2; ++i) confusion.add(num, 2, 0.8, 1);    // false positives
  for (int i = 0; i < 4; ++i) confusion.add(1, num, 0.4, 1);    // false negatives
  for (int i = 0; i < 5; ++i) confusion.add(3, 3, 0.6, 1);      // true negatives, right tokens
  const auto r = confusion.report();
  CHECK(r.num_true_positives == 3);
  CHECK(r.num_predicted == 5);
  CHECK(r.num_labels == 7);
  CHECK(*r.num_precision == doctest::Approx(3.0 / 5));
  CHECK(*r.num_recall == doctest::Approx(3.0 / 7));
  const double P = 3.0 / 5, R = 3.0 / 7;
  CHECK(*r.num_f1 == doctest::Approx(2 * P * R / (P + R)));
  CHECK(*r.num_f1 == doctest::Approx(0.5));
  CHECK(*r.accuracy == doctest::Approx(8.0 / 14));

  // no <NUM> predicted: precision undefined, recall and F1 are 0; no <NUM> at all: all undefined
  ce::TokenCalibration missed(num);
  missed.add(1, num, 0.5, 1);
  CHECK_FALSE(missed.report().num_precision.has_value());
  CHECK(*missed.report().num_recall == 0.0);
  CHECK(*missed.report().num_f1 == 0.0);
  ce::TokenCalibration none(num);
  none.add(1, 1, 0.5, 1);
  CHECK_FALSE(none.report().num_precision.has_value());
  CHECK_FALSE(none.report().num_recall.has_value());
  CHECK_FALSE(none.report().num_f1.has_value());
}

TEST_CASE("the report as JSON round-trips") {
  ce::GroupedCalibration grouped(7, 2.5);
  const std::vector<NumberSample> samples = cqtest::grouped_samples();
  cqtest::add_grouped_samples(grouped, samples);
  const auto report = grouped.report();
  check_numbers_by_hand(report.overall.numbers, samples, 2.5);

  const auto j = ce::calibration_to_json(report);
  CHECK(j["format"] == "causalqwen-calibration-1");
  CHECK(j["levels"] == nlohmann::json{0.5, 0.8, 0.9, 0.95});
  CHECK(j["overall"]["numbers"]["numbers"] == 5);
  CHECK(j["overall"]["numbers"]["intervals"][3]["nominal"] == 0.95);
  CHECK(j["overall"]["numbers"]["intervals"][0]["verdict"].is_string());
  CHECK(j["overall"]["tokens"]["reliability"].size() == 10);
  CHECK(j["overall"]["tokens"]["reliability"][0]["accuracy"].is_null());  // an empty bin
  const auto back = ce::calibration_from_json(nlohmann::json::parse(j.dump()), "report.json");
  CHECK(ce::calibration_to_json(back) == j);  // every field, bit for bit
  CHECK(back.overall.numbers.mae == report.overall.numbers.mae);
  CHECK(back.overall.numbers.mean_nll == report.overall.numbers.mean_nll);
  CHECK(back.overall.numbers.pit_counts == report.overall.numbers.pit_counts);
  CHECK(back.overall.numbers.baseline->mae_ratio == report.overall.numbers.baseline->mae_ratio);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(back.overall.numbers.intervals[i].coverage == report.overall.numbers.intervals[i].coverage);
    CHECK(back.overall.numbers.intervals[i].verdict == report.overall.numbers.intervals[i].verdict);
  }
  CHECK(back.overall.tokens.ece == report.overall.tokens.ece);
  CHECK(back.overall.tokens.num_f1 == report.overall.tokens.num_f1);
  REQUIRE(back.groups.size() == 2);
  CHECK(back.groups.at("a<b & \"c\"").numbers.numbers == 2);
  CHECK(back.groups.at("plain").tokens.positions == 3);
  // a damaged report is refused with the field named
  auto damaged = j;
  damaged["overall"]["numbers"]["intervals"].erase(1);
  CHECK(cqtest::error_message<cq::FormatError>([&] { ce::calibration_from_json(damaged, "report.json"); }) ==
        "report.json: overall.numbers.intervals must be an array of 4 elements");
  damaged = j;
  damaged["overall"]["numbers"]["intervals"][2]["verdict"] = "fine";
  CHECK(cqtest::error_message<cq::FormatError>([&] { ce::calibration_from_json(damaged, "report.json"); })
            .find("verdict must be") != std::string::npos);
}

TEST_CASE_TEMPLATE("empty and invalid input: no targets give a report of nulls, bad values an error", T, float, double) {
  ce::GroupedCalibration empty(7, 1.0);
  const auto report = empty.report();
  const auto& numbers = report.overall.numbers;
  CHECK(numbers.numbers == 0);
  CHECK_FALSE(numbers.mae.has_value());
  CHECK_FALSE(numbers.median_abs_error.has_value());
  CHECK_FALSE(numbers.mean_nll.has_value());
  CHECK_FALSE(numbers.pit_chi_square.has_value());
  REQUIRE(numbers.baseline.has_value());
  CHECK_FALSE(numbers.baseline->mae.has_value());
  for (const auto& c : numbers.intervals) {
    CHECK_FALSE(c.coverage.has_value());
    CHECK_FALSE(c.verdict.has_value());
  }
  CHECK_FALSE(report.overall.tokens.ece.has_value());
  CHECK_FALSE(report.overall.tokens.accuracy.has_value());
  const auto j = ce::calibration_to_json(report);
  CHECK(j["overall"]["numbers"]["numbers"] == 0);
  for (const char* key : {"mae", "median_abs_error", "mean_nll", "pit_chi_square"}) CHECK(j["overall"]["numbers"][key].is_null());
  for (const auto& c : j["overall"]["numbers"]["intervals"]) {
    CHECK(c["coverage"].is_null());
    CHECK(c["median_width"].is_null());
    CHECK(c["verdict"].is_null());
  }
  CHECK(j["overall"]["tokens"]["ece"].is_null());
  CHECK(j["overall"]["numbers"]["baseline"]["mae_ratio"].is_null());
  CHECK(ce::calibration_to_json(ce::calibration_from_json(j, "empty")) == j);

  // an evaluation over no batches
  cq::model::CausalQwen<T> model(cqtest::tiny_config());
  model.init_random(cqtest::test_seed(5, "calibration empty evaluation"));
  const auto e = ct::evaluate(model, std::span<const cq::train::BatchData<T>>{});
  CHECK(e.calibration.overall.numbers.numbers == 0);
  CHECK(e.calibration.overall.tokens.positions == 0);
  CHECK(ce::calibration_to_json(e.calibration)["overall"]["numbers"]["mae"].is_null());

  // values no statistic can hold
  ce::NumberCalibration n;
  CHECK(cqtest::error_message<cq::DomainError>([&] { n.add(1.0, 0.0, 0.0); }) ==
        "causalqwen::NumberCalibration::add: needs a finite target, a finite loc and a finite scale > 0, "
        "got y = 1, loc = 0, scale = 0");
  CHECK_THROWS_AS(n.add(std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0), cq::DomainError);
  CHECK_THROWS_AS(n.add(0.0, std::numeric_limits<double>::infinity(), 1.0), cq::DomainError);
  CHECK(n.size() == 0);
  ce::TokenCalibration t(7);
  CHECK_THROWS_AS(t.add(1, 1, 1.5, 1.0), cq::DomainError);
  CHECK_THROWS_AS(t.add(1, 1, std::numeric_limits<double>::quiet_NaN(), 1.0), cq::DomainError);
  CHECK_THROWS_AS(ce::NumberCalibration(std::numeric_limits<double>::infinity()), cq::DomainError);
}

TEST_CASE_TEMPLATE("evaluate: a diverged model's non-finite predictions are counted, not thrown", T, float, double) {
  const auto seed = cqtest::test_seed(17, "calibration of a diverged model");
  cq::model::CausalQwen<T> model(cqtest::tiny_config());
  model.init_random(seed);
  cqtest::CountingTokenSource<T> counting(3, 9, 11, 11);
  std::vector<cq::train::BatchData<T>> batches{counting.next()};
  const auto healthy = ct::evaluate(model, batches);
  REQUIRE(healthy.numbers > 0);
  CHECK(healthy.non_finite == 0);
  // a NaN regression bias: every loc_Y is NaN
  model.params().slot_span("causal.action.reg.bias")[0] = std::numeric_limits<T>::quiet_NaN();
  model.params().touch();
  ct::Evaluation e;
  CHECK_NOTHROW(e = ct::evaluate(model, batches));
  CHECK(e.non_finite == healthy.numbers);
  CHECK(e.calibration.overall.numbers.numbers == 0);
  CHECK(e.calibration.overall.tokens.positions == healthy.calibration.overall.tokens.positions);
}
