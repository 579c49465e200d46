// The scalar Cauchy distribution against Boost.Math's cauchy_distribution in long double
// (an independent implementation), at ordinary values and in the tails |z| = 1e-30 … 1e30,
// at ±0, ±∞ and NaN; identities; checked entry points; partials against central differences.
#include "../support/test_support.hpp"

#include <causalqwen/cauchy.hpp>

#include <boost/math/distributions/cauchy.hpp>

#include <array>
#include <limits>
#include <vector>

namespace cq = causalqwen;
using cqtest::close_ulps;
using LD = long double;

namespace {

const std::array<double, 15> k_magnitudes = {0.0,  1e-30, 1e-20, 1e-10, 1e-5, 0.1,  0.5, 1.0,
                                             2.0,  10.0,  1e3,   1e5,   1e10, 1e20, 1e30};
const std::array<std::pair<double, double>, 3> k_loc_scale = {{{0.0, 1.0}, {3.5, 1e-3}, {-2.0, 250.0}}};

template <class T>
struct Point {
  T x, loc, scale;
};

/// Every (x, loc, scale) with x = loc + z·scale for z = ±magnitude, representable in T.
template <class T>
std::vector<Point<T>> tail_grid() {
  std::vector<Point<T>> points;
  for (auto [loc, scale] : k_loc_scale)
    for (double m : k_magnitudes)
      for (double sign : {-1.0, 1.0}) {
        const double x = loc + sign * m * scale;
        if (std::fabs(x) > static_cast<double>(std::numeric_limits<T>::max())) continue;
        points.push_back({static_cast<T>(x), static_cast<T>(loc), static_cast<T>(scale)});
      }
  return points;
}

boost::math::cauchy_distribution<LD> dist(LD loc, LD scale) { return {loc, scale}; }

LD ref_cdf(LD x, LD l, LD s) { return boost::math::cdf(dist(l, s), x); }
LD ref_sf(LD x, LD l, LD s) { return boost::math::cdf(boost::math::complement(dist(l, s), x)); }
LD ref_log_cdf(LD x, LD l, LD s) { return x <= l ? std::log(ref_cdf(x, l, s)) : std::log1p(-ref_sf(x, l, s)); }
LD ref_log_sf(LD x, LD l, LD s) { return x >= l ? std::log(ref_sf(x, l, s)) : std::log1p(-ref_cdf(x, l, s)); }
LD ref_pdf(LD x, LD l, LD s) { return boost::math::pdf(dist(l, s), x); }

}  // namespace

// Accuracy stated in the headers: cdf, sf, pdf ≤ 3 ulp; log_cdf, log_sf ≤ 4 ulp; nll 4 ulp of
// max(1, |nll|); quantile ≤ 4 ulp. The test allows 2 ulp more for the rounding of z itself.
TEST_CASE_TEMPLATE("cdf, sf, log_cdf, log_sf, pdf, nll match Boost.Math in long double", T, float, double) {
  int checked = 0;
  for (const auto& p : tail_grid<T>()) {
    const LD x = p.x, l = p.loc, s = p.scale;
    CAPTURE(p.x);
    CAPTURE(p.loc);
    CAPTURE(p.scale);
    CHECK(close_ulps(cq::cdf(p.x, p.loc, p.scale), ref_cdf(x, l, s), 5));
    CHECK(close_ulps(cq::sf(p.x, p.loc, p.scale), ref_sf(x, l, s), 5));
    CHECK(close_ulps(cq::log_cdf(p.x, p.loc, p.scale), ref_log_cdf(x, l, s), 6));
    CHECK(close_ulps(cq::log_sf(p.x, p.loc, p.scale), ref_log_sf(x, l, s), 6));
    CHECK(close_ulps(cq::pdf(p.x, p.loc, p.scale), ref_pdf(x, l, s), 5));
    const LD ref_nll = -std::log(ref_pdf(x, l, s));
    CHECK(close_ulps(cq::nll(p.x, p.loc, p.scale), ref_nll, 6, 6 * std::numeric_limits<T>::epsilon()));
    CHECK(cq::log_pdf(p.x, p.loc, p.scale) == -cq::nll(p.x, p.loc, p.scale));
    ++checked;
  }
  CHECK(checked >= 80);
}

TEST_CASE_TEMPLATE("quantile matches Boost.Math and inverts cdf; sample(u) == quantile(u)", T, float, double) {
  const std::vector<double> ps = {1e-30, 1e-12, 1e-6, 1e-3, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.75, 0.8, 0.9, 0.999, 1 - 1e-6};
  for (auto [loc, scale] : k_loc_scale)
    for (double pd : ps) {
      const T p = static_cast<T>(pd), l = static_cast<T>(loc), s = static_cast<T>(scale);
      if (!(p > 0 && p < 1)) continue;
      CAPTURE(pd);
      const LD ref = boost::math::quantile(dist(l, s), static_cast<LD>(p));
      // The error of loc + scale·w is relative to max(|loc|, |scale·w|).
      const T q = cq::quantile(p, l, s);
      const double floor = 6 * std::numeric_limits<T>::epsilon() * std::fabs(static_cast<double>(l));
      CHECK(close_ulps(q, ref, 6, floor + std::numeric_limits<T>::min()));
      CHECK(cq::sample(p, l, s) == q);
      // quantile(cdf(x)) = x away from the far tails, where cdf's own rounding dominates
      // up to cdf's own error and the rounding of q itself (ulp(q) times the density at q)
      if (pd > 1e-6 && pd < 1 - 1e-6) {
        const double e = std::numeric_limits<T>::epsilon();
        const double tol = 8 * e * p + 2 * e * std::fabs(double(q)) * cq::pdf(double(q), double(l), double(s));
        CHECK(std::fabs(cq::cdf(q, l, s) - double(p)) <= tol);
      }
    }
  CHECK(cq::quantile(T(0.5), T(3), T(2)) == T(3));
}

TEST_CASE_TEMPLATE("identities: cdf + sf = 1, quantile(cdf(x)) = x, softplus(inv_softplus(y)) = y", T, float, double) {
  const T eps = std::numeric_limits<T>::epsilon();
  for (double zd : {-1e4, -300.0, -20.0, -3.0, -1.0, -0.25, -1e-3, 0.0, 1e-3, 0.25, 1.0, 3.0, 20.0, 300.0, 1e4}) {
    const T z = static_cast<T>(zd);
    CHECK(cqtest::close_rel(double(cq::cdf(z, T(0), T(1)) + cq::sf(z, T(0), T(1))), 1.0, 2 * eps));
    const T x = cq::quantile(cq::cdf(z, T(0), T(1)), T(0), T(1));
    // the round trip is conditioned by dx/dp = π(1 + x²), and p near 1 carries an absolute
    // rounding of ε/2: |x − z| ≤ 4ε·π(1 + z²) + 4ε|z|
    CAPTURE(zd);
    CHECK(std::fabs(double(x) - double(z)) <= 4 * eps * (M_PI * (1 + zd * zd) + std::fabs(zd)));
  }
  for (double y = 1e-30; y < 1e30; y *= 7.3) {
    if (y > static_cast<double>(std::numeric_limits<T>::max()) || y < static_cast<double>(std::numeric_limits<T>::min())) continue;
    const T yt = static_cast<T>(y);
    CAPTURE(y);
    // exp inside softplus amplifies the rounding of x = inv_softplus(y) by |x|: allow 8 + 2|x| ulp
    const T x = cq::inv_softplus(yt);
    CHECK(close_ulps(cq::softplus(x), static_cast<LD>(yt), 8 + 2 * std::fabs(double(x))));
  }
}

TEST_CASE_TEMPLATE("special values: ±0, ±∞, NaN", T, float, double) {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  CHECK(cq::cdf(T(0), T(0), T(1)) == T(0.5));
  CHECK(cq::cdf(T(-0.0), T(0), T(1)) == T(0.5));
  CHECK(cq::cdf(-inf, T(0), T(1)) == T(0));
  CHECK(cq::cdf(inf, T(0), T(1)) == T(1));
  CHECK(cq::sf(inf, T(0), T(1)) == T(0));
  CHECK(cq::log_cdf(-inf, T(0), T(1)) == -inf);
  CHECK(cq::log_cdf(inf, T(0), T(1)) == T(0));
  CHECK(cq::log_sf(inf, T(0), T(1)) == -inf);
  CHECK(cq::log_sf(-inf, T(0), T(1)) == T(0));
  CHECK(cq::pdf(inf, T(0), T(1)) == T(0));
  CHECK(cq::nll(inf, T(0), T(1)) == inf);
  CHECK(std::isnan(cq::cdf(nan, T(0), T(1))));
  CHECK(std::isnan(cq::log_cdf(nan, T(0), T(1))));
  CHECK(std::isnan(cq::nll(nan, T(0), T(1))));
  CHECK(std::isnan(cq::pdf(nan, T(0), T(1))));
  // gradients stay finite at ±∞ (limits), never NaN
  for (T x : {-inf, inf}) {
    for (auto g : {cq::cdf_grad(x, T(0), T(1)), cq::log_cdf_grad(x, T(0), T(1)), cq::log_sf_grad(x, T(0), T(1)),
                   cq::nll_grad(x, T(0), T(1)), cq::pdf_grad(x, T(0), T(1))}) {
      CHECK(std::isfinite(g.d_x));
      CHECK(std::isfinite(g.d_loc));
      CHECK(std::isfinite(g.d_scale));
    }
  }
  // the lower-tail slope of log_cdf tends to 1/|x|, and z·slope to −1
  const auto g = cq::log_cdf_grad(T(-1e30), T(0), T(1));
  CHECK(close_ulps(g.d_x, 1e-30L, 8));
  CHECK(close_ulps(g.d_scale, 1.0L, 8));  // −z·d/dz log F → 1
}

TEST_CASE("checked entry points name the function and the argument") {
  auto message = [](auto f) { return cqtest::error_message<cq::DomainError>(f); };
  CHECK(message([] { cq::cdf(0.0, 0.0, -1.0); }) == "causalqwen::cdf: scale must be > 0, got -1");
  CHECK(message([] { cq::nll(0.0, 0.0, 0.0); }) == "causalqwen::nll: scale must be > 0, got 0");
  CHECK(message([] { cq::pdf(0.0f, 0.0f, std::numeric_limits<float>::quiet_NaN()); }) ==
        "causalqwen::pdf: scale must be > 0, got nan");
  CHECK(message([] { cq::quantile(1.5, 0.0, 1.0); }) == "causalqwen::quantile: p must lie in (0, 1), got 1.5");
  CHECK(message([] { cq::sample(0.0, 0.0, 1.0); }) == "causalqwen::sample: u must lie in (0, 1), got 0");
  CHECK(message([] { cq::inv_softplus(-2.0); }) == "causalqwen::inv_softplus: y must be > 0, got -2");
  CHECK(message([] { cq::ovr_bce(2.0, 0.0, 1.0, 0.0); }) == "causalqwen::ovr_bce: label y must lie in [0, 1], got 2");
  CHECK(message([] { cq::log_sf_grad(1.0L, 0.0L, -3.0L); }) == "causalqwen::log_sf_grad: scale must be > 0, got -3");
  // the raw kernels do not check
  CHECK(std::isnan(cq::raw::cdf(0.0, 0.0, std::numeric_limits<double>::quiet_NaN())));
}

TEST_CASE("every partial derivative matches central differences (double)") {
  using D = double;
  const std::vector<Point<D>> points = {{0.3, 0.0, 1.0}, {-4.0, 1.0, 2.0}, {25.0, -3.0, 0.7}, {-60.0, 2.0, 1.5}, {1.1, 1.0, 0.01}};
  auto check3 = [](const char* name, auto fn, auto grad, D a, D b, D c) {
    const auto g = grad(a, b, c);
    CAPTURE(name);
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    CHECK(g.value == doctest::Approx(fn(a, b, c)).epsilon(1e-15));
    CHECK(cqtest::close_rel(g.d_x, cqtest::central_difference([&](D v) { return fn(v, b, c); }, a), 1e-6, 1e-8));
    CHECK(cqtest::close_rel(g.d_loc, cqtest::central_difference([&](D v) { return fn(a, v, c); }, b), 1e-6, 1e-8));
    CHECK(cqtest::close_rel(g.d_scale, cqtest::central_difference([&](D v) { return fn(a, b, v); }, c, 1e-7), 1e-6, 1e-8));
  };
#define CQ_FN(f) [](D a, D b, D c) { return cq::raw::f(a, b, c); }
  for (const auto& p : points) {
    check3("pdf", CQ_FN(pdf), CQ_FN(pdf_grad), p.x, p.loc, p.scale);
    check3("log_pdf", CQ_FN(log_pdf), CQ_FN(log_pdf_grad), p.x, p.loc, p.scale);
    check3("nll", CQ_FN(nll), CQ_FN(nll_grad), p.x, p.loc, p.scale);
    check3("cdf", CQ_FN(cdf), CQ_FN(cdf_grad), p.x, p.loc, p.scale);
    check3("sf", CQ_FN(sf), CQ_FN(sf_grad), p.x, p.loc, p.scale);
    check3("log_cdf", CQ_FN(log_cdf), CQ_FN(log_cdf_grad), p.x, p.loc, p.scale);
    check3("log_sf", CQ_FN(log_sf), CQ_FN(log_sf_grad), p.x, p.loc, p.scale);
  }
  for (D p : {1e-4, 0.1, 0.3, 0.5, 0.77, 0.95}) {
    const auto g = cq::quantile_grad(p, 1.5, 2.0);
    CHECK(cqtest::close_rel(g.d_p, cqtest::central_difference([](D v) { return cq::raw::quantile(v, 1.5, 2.0); }, p, 1e-9), 1e-5, 1e-8));
    CHECK(cqtest::close_rel(g.d_loc, cqtest::central_difference([p](D v) { return cq::raw::quantile(p, v, 2.0); }, 1.5), 1e-6, 1e-8));
    CHECK(cqtest::close_rel(g.d_scale, cqtest::central_difference([p](D v) { return cq::raw::quantile(p, 1.5, v); }, 2.0), 1e-6, 1e-8));
    const auto s = cq::sample_grad(p, 1.5, 2.0);
    CHECK(s.value == g.value);
  }
#undef CQ_FN
}

TEST_CASE("long double: the same functions, against Boost.Math at ordinary values") {
  for (const auto& p : tail_grid<LD>()) {
    if (std::fabs(p.x - p.loc) > 1e6L * p.scale) continue;
    CHECK(close_ulps(cq::cdf(p.x, p.loc, p.scale), ref_cdf(p.x, p.loc, p.scale), 16));
    CHECK(close_ulps(cq::log_sf(p.x, p.loc, p.scale), ref_log_sf(p.x, p.loc, p.scale), 16));
  }
  CHECK(close_ulps(cq::quantile(0.9L, 0.0L, 1.0L), boost::math::quantile(dist(0, 1), 0.9L), 16));
}
