// The synthetic-features source: the story's statistics, the ideal head, determinism and
// state()/restore().
#include "../support/test_support.hpp"

#include <causalqwen/datasets/synthetic_features.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace tr = causalqwen::train;
namespace ds = causalqwen::datasets;

TEST_CASE("feature batches follow the story: class shares, prototypes, values linear in z plus Cauchy noise") {
  const auto seed = cqtest::test_seed(51, "feature statistics");
  ds::FeatureStoryOptions o;
  o.hidden = 16;
  o.num_classes = 8;
  o.num_token_id = 3;
  o.rows = 500;
  o.num_share = 0.3;
  o.value_noise_scale = 0.2;
  o.seed = seed;
  ds::SyntheticFeatureSource<double> source(o);
  const std::size_t H = o.hidden, K = o.num_classes;
  std::vector<double> sum(K * H, 0.0);
  std::vector<std::size_t> count(K, 0);
  std::vector<double> abs_residual;
  double nll = 0;
  for (int batch = 0; batch < 40; ++batch) {
    const auto b = source.next();
    REQUIRE(b.rows == 500);
    REQUIRE(b.hidden == H);
    for (std::size_t r = 0; r < b.rows; ++r) {
      const auto y = b.labels[r];
      REQUIRE(y >= 0);
      REQUIRE(y < std::int64_t(K));
      ++count[y];
      std::vector<double> z(b.features.begin() + r * H, b.features.begin() + (r + 1) * H);
      for (std::size_t h = 0; h < H; ++h) sum[y * H + h] += z[h];
      if (y == o.num_token_id) {
        const double res = b.target_values[r] - source.value_loc(z);
        abs_residual.push_back(std::fabs(res));
        nll += std::log(std::numbers::pi * o.value_noise_scale) + std::log1p(std::pow(res / o.value_noise_scale, 2));
      } else {
        REQUIRE(b.target_values[r] == 0.0);
      }
    }
  }
  const double rows = 40.0 * 500;
  CHECK(std::fabs(count[3] / rows - 0.3) < 0.015);  // ≈ 5 standard deviations
  for (std::size_t k = 0; k < K; ++k) {
    if (k == 3) continue;
    CHECK(std::fabs(count[k] / rows - 0.1) < 0.012);
  }
  // Class means ≈ prototypes (noise_std 0.5 over ≥ 1,700 rows: σ ≈ 0.012).
  double worst = 0;
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t h = 0; h < H; ++h)
      worst = std::max(worst, std::fabs(sum[k * H + h] / count[k] - source.prototypes()[k * H + h]));
  CHECK(worst < 0.07);
  // Residuals: median |Cauchy(0, γ)| = γ; mean NLL ≈ log(4πγ).
  std::nth_element(abs_residual.begin(), abs_residual.begin() + abs_residual.size() / 2, abs_residual.end());
  const double median = abs_residual[abs_residual.size() / 2];
  CHECK(std::fabs(median / o.value_noise_scale - 1) < 0.08);
  const double mean_nll = nll / double(count[3]);
  MESSAGE("median |residual| " << median << " (γ = 0.2), mean NLL " << mean_nll << " vs ideal " << source.ideal_nll());
  CHECK(std::fabs(mean_nll - source.ideal_nll()) < 0.06);
  // The Bayes rule: well-separated prototypes → near-perfect; heavy noise → far from it.
  CHECK(source.ideal_accuracy() > 0.99);
  ds::FeatureStoryOptions noisy = o;
  noisy.noise_std = 3.0;
  const double hard = ds::SyntheticFeatureSource<double>(noisy).ideal_accuracy();
  CHECK(hard < 0.9);
  CHECK(hard > 0.3);  // still better than the 0.3 of always saying <NUM>
}

TEST_CASE("feature batches: determinism, state()/restore(), and refusal of another story") {
  const auto seed = cqtest::test_seed(52, "feature state");
  ds::FeatureStoryOptions o;
  o.rows = 8;
  o.seed = seed;
  ds::SyntheticFeatureSource<float> a(o), b(o);
  for (int i = 0; i < 3; ++i) {
    const auto x = a.next(), y = b.next();
    REQUIRE(x.features == y.features);
    REQUIRE(x.labels == y.labels);
    REQUIRE(x.target_values == y.target_values);
  }
  const auto state = nlohmann::json::parse(a.state().dump());
  const auto expected = a.next();
  ds::SyntheticFeatureSource<float> c(o);
  c.restore(state);
  const auto got = c.next();
  CHECK(got.features == expected.features);
  CHECK(got.labels == expected.labels);
  CHECK(got.target_values == expected.target_values);
  ds::FeatureStoryOptions other = o;
  other.seed = seed + 1;
  ds::SyntheticFeatureSource<float> d(other);
  CHECK(d.next().features != ds::SyntheticFeatureSource<float>(o).next().features);
  CHECK(cqtest::error_message<causalqwen::FormatError>([&] { d.restore(state); }).find("differ from this source's") !=
        std::string::npos);
  o.num_token_id = 16;
  CHECK(cqtest::error_message<causalqwen::DomainError>([&] { ds::SyntheticFeatureSource<float> e(o); })
            .find("num_token_id 16 must lie in [0, 16)") != std::string::npos);
}
