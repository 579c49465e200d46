// eval/scores.hpp and eval/aggregate.hpp: the closed-form Cauchy and Gaussian CRPS against a
// numerical integration of ∫(F(x) − 1{y ≤ x})² dx in long double (|z| from 0 to 1e30, where the
// naive z² overflows float and the kernel form is ∞ − ∞), in float and double; the normal
// quantile; the interval score, the pinball loss and its mean over the grid by hand; and the
// mean, median, trimmed mean and skill score of small lists.
#include <causalqwen/eval/aggregate.hpp>
#include <causalqwen/eval/scores.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace ce = causalqwen::eval;

namespace {

using LD = long double;

/// Gauss–Legendre nodes and weights on [−1, 1] (Newton on P_n, in long double).
struct GaussLegendre {
  std::vector<LD> x, w;
  explicit GaussLegendre(int n) {
    for (int i = 1; i <= n; ++i) {
      LD t = std::cos(std::numbers::pi_v<LD> * (i - 0.25L) / (n + 0.5L)), dp = 0;
      for (int it = 0; it < 100; ++it) {
        LD p0 = 1, p1 = t;
        for (int k = 2; k <= n; ++k) {
          const LD p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
          p0 = p1;
          p1 = p2;
        }
        dp = n * (t * p1 - p0) / (t * t - 1);
        const LD step = p1 / dp;
        t -= step;
        if (std::fabs(step) < 1e-19L) break;
      }
      x.push_back(t);
      w.push_back(2 / ((1 - t * t) * dp * dp));
    }
  }
  /// ∫_a^b f over `panels` equal panels.
  template <class F>
  LD integrate(F f, LD a, LD b, int panels) const {
    LD total = 0;
    const LD h = (b - a) / panels;
    for (int p = 0; p < panels; ++p) {
      const LD mid = a + (p + 0.5L) * h;
      for (std::size_t i = 0; i < x.size(); ++i) total += w[i] * f(mid + 0.5L * h * x[i]);
    }
    return total * 0.5L * h;
  }
};

const GaussLegendre& gauss() {
  static const GaussLegendre g(20);
  return g;
}

/// S(u) = 1 − F(u) of the standard Cauchy, atan2(1, u)/π (no cancellation for large u).
LD cauchy_sf(LD u) { return std::atan2(1.0L, u) / std::numbers::pi_v<LD>; }

/// ∫_a^∞ g(u) du for a ≥ 1 and g decaying like 1/u²: u = e^v from log a to log a + 120.
template <class G>
LD tail_integral(G g, LD a) {
  const LD from = std::log(a);
  return gauss().integrate([&](LD v) { return g(std::exp(v)) * std::exp(v); }, from, from + 120, 600);
}

/// ∫_0^t h(u) du for a smooth h decaying like 1/u: [0, 1] plainly, [1, t] in u = e^v.
template <class H>
LD head_integral(H h, LD t) {
  if (t <= 1) return gauss().integrate(h, 0, t, 50);
  return gauss().integrate(h, 0, 1, 50) +
         gauss().integrate([&](LD v) { return h(std::exp(v)) * std::exp(v); }, 0, std::log(t), 800);
}

/// A(t) = ∫_{−∞}^t F(x)² dx for the standard Cauchy: for t ≤ 0, ∫_{|t|}^∞ S(u)² du; for t > 0,
/// A(0) + t − ∫_0^t S(u)(2 − S(u)) du (F² = 1 − S(2 − S), so the growing part t is exact).
LD cauchy_A(LD t) {
  const auto sf2 = [](LD u) { return cauchy_sf(u) * cauchy_sf(u); };
  const LD a0 = gauss().integrate(sf2, 0, 1, 50) + tail_integral(sf2, 1);
  if (t == 0) return a0;
  if (t < 0) {
    const LD m = -t;
    if (m >= 1) return tail_integral(sf2, m);
    return a0 - gauss().integrate(sf2, 0, m, 50);
  }
  return a0 + t - head_integral([](LD u) { return cauchy_sf(u) * (2 - cauchy_sf(u)); }, t);
}

/// CRPS of the standard Cauchy at z by quadrature: ∫_{−∞}^z F² + ∫_z^∞ (1 − F)² = A(z) + A(−z).
LD cauchy_crps_quadrature(LD z) { return cauchy_A(z) + cauchy_A(-z); }

/// The same for the standard normal, Φ(x) = ½·erfc(−x/√2).
LD normal_sf(LD u) { return 0.5L * std::erfc(u / std::numbers::sqrt2_v<LD>); }
LD normal_A(LD t) {
  const auto sf2 = [](LD u) { return normal_sf(u) * normal_sf(u); };
  const LD a0 = gauss().integrate(sf2, 0, 40, 400);
  if (t <= 0) return gauss().integrate(sf2, -t, -t + 40, 400);
  const LD upper = std::min<LD>(t, 40);
  return a0 + t - gauss().integrate([](LD u) { return normal_sf(u) * (2 - normal_sf(u)); }, 0, upper, 400);
}
LD normal_crps_quadrature(LD z) { return normal_A(z) + normal_A(-z); }

}  // namespace

TEST_CASE("the closed-form quadrature reference itself: CRPS(0) = 2·log 2/π for the Cauchy, (√2 − 1)/√π for the normal") {
  CHECK(cqtest::close_rel(static_cast<double>(cauchy_crps_quadrature(0)), 2 * std::numbers::ln2 / std::numbers::pi, 1e-13));
  CHECK(cqtest::close_rel(static_cast<double>(normal_crps_quadrature(0)), (std::sqrt(2.0) - 1) / std::sqrt(std::numbers::pi), 1e-13));
}

TEST_CASE_TEMPLATE("Cauchy CRPS = (2σ/π)[z·atan z − ½log(1+z²) + log 2] agrees with ∫(F − 1{y ≤ x})² dx up to |z| = 1e30", T,
                   float, double) {
  const double tolerance = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  for (LD z : {0.0L, 1e-8L, 0.3L, -0.999L, 1.0L, 1.5L, -7.0L, 42.0L, 1e3L, -1e6L, 1e9L, 1e15L, -1e20L, 1e30L}) {
    const LD expected = cauchy_crps_quadrature(z);
    for (double scale : {1.0, 0.01, 250.0}) {
      const double loc = 3.0;
      const T y = static_cast<T>(loc + static_cast<double>(z) * scale);
      // the quadrature at the z the rounded y really has
      const LD z_actual = (static_cast<LD>(y) - loc) / scale;
      const LD reference = (z_actual == z ? expected : cauchy_crps_quadrature(z_actual)) * scale;
      const T got = ce::cauchy_crps(y, T(loc), T(scale));
      INFO("z = ", static_cast<double>(z), ", scale = ", scale, ", got ", static_cast<double>(got), ", expected ",
           static_cast<double>(reference));
      CHECK(std::isfinite(got));
      CHECK(cqtest::close_rel(static_cast<double>(got), static_cast<double>(reference), tolerance, 1e-30));
    }
  }
}

TEST_CASE_TEMPLATE("Cauchy CRPS where the naive z² overflows: scale 1e-30 and |y − loc| = 1e8 (z = 1e38)", T, float, double) {
  const T got = ce::cauchy_crps(T(1e8), T(0), T(1e-30));
  // CRPS = d − (2σ/π)(log z + ½log1p(1/z²) − log 2 + z·atan(1/z)/…): the σ-terms are 1e-28 of d
  CHECK(std::isfinite(got));
  CHECK(cqtest::close_rel(static_cast<double>(got), 1e8, 1e-6));
  CHECK(ce::cauchy_crps(std::numeric_limits<T>::infinity(), T(0), T(1)) == std::numeric_limits<T>::infinity());
  CHECK(std::isnan(ce::cauchy_crps(std::numeric_limits<T>::quiet_NaN(), T(0), T(1))));
}

TEST_CASE("Cauchy CRPS is symmetric in z, grows with |z| and is linear in the scale") {
  double previous = 0;
  for (double z : {0.0, 0.5, 1.0, 2.0, 10.0, 1e5}) {
    const double c = ce::cauchy_crps(z, 0.0, 1.0);
    CHECK(c == doctest::Approx(ce::cauchy_crps(-z, 0.0, 1.0)).epsilon(1e-15));
    CHECK(c > previous);
    previous = c;
    CHECK(ce::cauchy_crps(4 * z, 0.0, 4.0) == doctest::Approx(4 * c).epsilon(1e-14));
  }
}

TEST_CASE_TEMPLATE("Gaussian CRPS = σ[z(2Φ(z) − 1) + 2φ(z) − 1/√π] agrees with the quadrature", T, float, double) {
  const double tolerance = std::is_same_v<T, float> ? 2e-6 : 1e-12;
  for (LD z : {0.0L, 0.1L, -1.0L, 2.5L, -6.0L, 12.0L, 1e4L, -1e12L, 1e30L}) {
    const double scale = 2.0;
    const T y = static_cast<T>(static_cast<double>(z) * scale);
    const LD z_actual = static_cast<LD>(y) / scale;
    const LD reference = normal_crps_quadrature(z_actual) * scale;
    const T got = ce::gaussian_crps(y, T(0), T(scale));
    INFO("z = ", static_cast<double>(z), ", got ", static_cast<double>(got), ", expected ", static_cast<double>(reference));
    CHECK(cqtest::close_rel(static_cast<double>(got), static_cast<double>(reference), tolerance, 1e-30));
  }
}

TEST_CASE("normal quantile: known values, and Φ(Φ⁻¹(p)) = p from 1e-300 to 1 − 1e-16") {
  CHECK(ce::normal_quantile(0.5) == 0.0);
  CHECK(ce::normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-15));
  CHECK(ce::normal_quantile(0.05) == doctest::Approx(-1.6448536269514722).epsilon(1e-15));
  CHECK(ce::normal_quantile(1e-10) == doctest::Approx(-6.361340902404056).epsilon(1e-13));
  for (double p : {1e-300, 1e-20, 1e-5, 0.02, 0.0243, 0.3, 0.6, 0.9, 0.99, 1 - 1e-12}) {
    const double x = ce::normal_quantile(p);
    const double back = p < 0.5 ? ce::normal_cdf(x) : 1 - ce::normal_cdf(-x);
    INFO("p = ", p, ", x = ", x);
    CHECK(back == doctest::Approx(p).epsilon(p < 0.5 ? 1e-13 : 1e-15));
  }
  CHECK(std::isinf(ce::normal_quantile(0.0)));
  CHECK(std::isnan(ce::normal_quantile(1.5)));
  CHECK(ce::gaussian_half_width(0.95) == doctest::Approx(1.959963984540054).epsilon(1e-15));
  CHECK(ce::cauchy_half_width(0.5) == doctest::Approx(1.0).epsilon(1e-15));
}

TEST_CASE_TEMPLATE("interval score and pinball loss by hand", T, float, double) {
  // [l, u] = [1, 3], α = 0.1: inside → width 2; below by 0.5 → 2 + 20·0.5 = 12; above by 2 → 2 + 40
  CHECK(ce::interval_score(T(1), T(3), T(2), T(0.1)) == doctest::Approx(2));
  CHECK(ce::interval_score(T(1), T(3), T(0.5), T(0.1)) == doctest::Approx(12));
  CHECK(ce::interval_score(T(1), T(3), T(5), T(0.1)) == doctest::Approx(42));
  CHECK(ce::pinball_loss(T(5), T(3), T(0.9)) == doctest::Approx(1.8));
  CHECK(ce::pinball_loss(T(1), T(3), T(0.9)) == doctest::Approx(0.2));
  CHECK(ce::pinball_loss(T(3), T(3), T(0.3)) == 0);
  // a point forecast's mean pinball over τ = 0.05…0.95 is |y − c|/2 (the τ grid is symmetric)
  CHECK(ce::point_mean_pinball(T(7), T(3)) == doctest::Approx(2).epsilon(1e-6));
  CHECK(ce::point_mean_pinball(T(-1), T(3)) == doctest::Approx(2).epsilon(1e-6));
  // the Cauchy's mean pinball: each quantile by hand
  double expected = 0;
  for (double tau : ce::pinball_levels) {
    const double q = 1.0 + 2.0 * std::tan(std::numbers::pi * (tau - 0.5));
    expected += (4.0 - q) * (tau - (4.0 < q ? 1.0 : 0.0));
  }
  CHECK(ce::cauchy_mean_pinball(T(4), T(1), T(2)) == doctest::Approx(expected / 19).epsilon(std::is_same_v<T, float> ? 1e-5 : 1e-12));
  CHECK(ce::pinball_levels.front() == doctest::Approx(0.05));
  CHECK(ce::pinball_levels.back() == doctest::Approx(0.95));
}

TEST_CASE("Gaussian and Cauchy NLL") {
  CHECK(ce::gaussian_nll(1.0, 0.0, 1.0) == doctest::Approx(0.5 * std::log(2 * std::numbers::pi) + 0.5));
  CHECK(ce::cauchy_nll(1.0, 0.0, 1.0) == doctest::Approx(std::log(std::numbers::pi) + std::log(2.0)));
}

TEST_CASE("mean, median, trimmed mean and skill score") {
  const std::vector<double> v{5, 1, 3, 100, 2, 4, 6, 7, 8, 9};
  CHECK(*ce::mean_of(v) == doctest::Approx(14.5));
  CHECK(*ce::median_of(v) == doctest::Approx(5.5));
  // 10 values, ⌊0.1·10⌋ = 1 cut at each end: mean of 2…9 = 5.5
  CHECK(*ce::trimmed_mean_of(v) == doctest::Approx(5.5));
  CHECK(*ce::trimmed_mean_of({1, 2, 3}) == doctest::Approx(2));  // ⌊0.3⌋ = 0 cut
  CHECK(*ce::median_of({3, 1, 2}) == 2);
  CHECK_FALSE(ce::mean_of({}).has_value());
  CHECK_FALSE(ce::median_of({}).has_value());
  CHECK_FALSE(ce::trimmed_mean_of({}).has_value());
  CHECK(*ce::skill_score(2.0, 8.0) == doctest::Approx(0.75));
  CHECK(*ce::skill_score(10.0, 8.0) == doctest::Approx(-0.25));
  CHECK_FALSE(ce::skill_score(1.0, 0.0).has_value());
  CHECK_FALSE(ce::skill_score(std::nullopt, 1.0).has_value());
}
