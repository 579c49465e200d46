// OvR probability, its logs and the BCE: accuracy against Boost.Math in long double for
// |z| = 0 … 1e30 and at ±∞/NaN, where the ε-form fails; partials against central differences;
// the vectorised row kernels against the scalar functions (random rows, tails, extremes).
#include "../support/test_support.hpp"

#include <causalqwen/cauchy.hpp>

#include <boost/math/distributions/cauchy.hpp>

#include <random>
#include <vector>

namespace cq = causalqwen;
using cqtest::close_ulps;
using LD = long double;

namespace {
/// Reference log P and log(1 − P) for P = P(S > C), S ~ Cauchy(loc, scale), in long double.
struct RefLogs {
  LD log_p, log_q;
};
RefLogs ref_logs(LD loc, LD scale, LD thr) {
  boost::math::cauchy_distribution<LD> d(loc, scale);
  const LD p = boost::math::cdf(boost::math::complement(d, thr));  // P(S > C)
  const LD q = boost::math::cdf(d, thr);                          // P(S ≤ C)
  return {p < 0.5L ? std::log(p) : std::log1p(-q), q < 0.5L ? std::log(q) : std::log1p(-p)};
}
}  // namespace

TEST_CASE_TEMPLATE("ovr_prob, log P, log(1 − P) and BCE are accurate for |z| up to 1e30", T, float, double) {
  const T thr = T(10);
  for (T scale : {T(1), T(1e-3), T(300)})
    for (double m : {0.0, 1e-30, 1e-10, 1e-3, 0.5, 1.0, 7.0, 1e3, 1e8, 1e15, 1e30})
      for (double sign : {-1.0, 1.0}) {
        const double locd = 10.0 + sign * m * static_cast<double>(scale);
        if (std::fabs(locd) > static_cast<double>(std::numeric_limits<T>::max())) continue;
        const T loc = static_cast<T>(locd);
        CAPTURE(locd);
        CAPTURE(scale);
        const auto ref = ref_logs(loc, scale, thr);
        CHECK(close_ulps(cq::ovr_prob(loc, scale, thr), std::exp(ref.log_p), 5));
        CHECK(close_ulps(cq::ovr_log_prob(loc, scale, thr), ref.log_p, 6));
        CHECK(close_ulps(cq::ovr_log_1m_prob(loc, scale, thr), ref.log_q, 6));
        // BCE: absolute error within a few ulp of max(1, BCE)
        const double tol = 6 * std::numeric_limits<T>::epsilon();
        CHECK(close_ulps(cq::ovr_bce(T(1), loc, scale, thr), -ref.log_p, 6, tol));
        CHECK(close_ulps(cq::ovr_bce(T(0), loc, scale, thr), -ref.log_q, 6, tol));
        CHECK(close_ulps(cq::ovr_bce(T(0.25), loc, scale, thr), -(0.25L * ref.log_p + 0.75L * ref.log_q), 8, tol));
      }
}

TEST_CASE("the ε = 1e-7 form log(P + ε) saturates where the stable form does not") {
  // z = −1e12: the true BCE for a positive label is log(π·1e12) ≈ 28.8; ε caps it at −log ε ≈ 16.1
  const double loc = 10.0 - 1e12, scale = 1.0, thr = 10.0;
  const double stable = cq::ovr_bce(1.0, loc, scale, thr);
  const double eps_form = cq::ovr_bce_eps(1.0, loc, scale, thr);
  CHECK(stable == doctest::Approx(std::log(M_PI * 1e12)).epsilon(1e-12));
  CHECK(eps_form < 16.2);
  CHECK(stable - eps_form > 12.0);
  // and its gradient vanishes there (the learning signal is lost), the stable one's does not
  CHECK(std::fabs(cq::ovr_bce_eps_grad(1.0, loc, scale, thr).d_loc) < 1e-10);
  CHECK(cq::ovr_bce_grad(1.0, loc, scale, thr).d_loc == doctest::Approx(-1e-12).epsilon(1e-6));
  // at moderate z both forms agree to ~ε
  CHECK(cq::ovr_bce_eps(0.0, 3.0, 2.0, 1.0) == doctest::Approx(cq::ovr_bce(0.0, 3.0, 2.0, 1.0)).epsilon(1e-6));
}

TEST_CASE_TEMPLATE("OvR at ±∞ and NaN: exact limits, finite gradients", T, float, double) {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  CHECK(cq::ovr_prob(inf, T(1), T(0)) == T(1));
  CHECK(cq::ovr_prob(-inf, T(1), T(0)) == T(0));
  CHECK(cq::ovr_bce(T(0), -inf, T(1), T(0)) == T(0));
  CHECK(cq::ovr_bce(T(0), inf, T(1), T(0)) == inf);
  CHECK(cq::ovr_bce(T(1), inf, T(1), T(0)) == T(0));
  CHECK(cq::ovr_bce(T(1), -inf, T(1), T(0)) == inf);
  for (T y : {T(0), T(1)})
    for (T loc : {-inf, inf}) {
      const auto g = cq::ovr_bce_grad(y, loc, T(1), T(0));
      CHECK(std::isfinite(g.d_loc));
      CHECK(std::isfinite(g.d_scale));
      CHECK(std::isfinite(g.d_threshold));
    }
  CHECK(std::isnan(cq::ovr_bce(T(0), nan, T(1), T(0))));
  CHECK(std::isnan(cq::ovr_prob(nan, T(1), T(0))));
}

TEST_CASE("OvR partials match central differences (double)") {
  for (double y : {0.0, 1.0, 0.3})
    for (auto [loc, scale, thr] : std::vector<std::array<double, 3>>{{3.0, 2.0, 1.0}, {-40.0, 1.5, 10.0}, {60.0, 0.8, 10.0}, {10.0, 1.0, 10.0}}) {
      CAPTURE(y);
      CAPTURE(loc);
      auto f = [y](double l, double s, double c) { return cq::raw::ovr_bce(y, l, s, c); };
      const auto g = cq::ovr_bce_grad(y, loc, scale, thr);
      CHECK(cqtest::close_rel(g.d_loc, cqtest::central_difference([&](double v) { return f(v, scale, thr); }, loc), 1e-6, 1e-9));
      CHECK(cqtest::close_rel(g.d_scale, cqtest::central_difference([&](double v) { return f(loc, v, thr); }, scale, 1e-7), 1e-6, 1e-9));
      CHECK(cqtest::close_rel(g.d_threshold, cqtest::central_difference([&](double v) { return f(loc, scale, v); }, thr), 1e-6, 1e-9));
      const auto p = cq::ovr_prob_grad(loc, scale, thr);
      CHECK(cqtest::close_rel(p.d_loc, cqtest::central_difference([&](double v) { return cq::raw::ovr_prob(v, scale, thr); }, loc), 1e-6, 1e-9));
      CHECK(cqtest::close_rel(p.d_scale, cqtest::central_difference([&](double v) { return cq::raw::ovr_prob(loc, v, thr); }, scale, 1e-7), 1e-6, 1e-9));
      const auto e = cq::ovr_bce_eps_grad(y, loc, scale, thr);
      CHECK(cqtest::close_rel(e.d_loc, cqtest::central_difference([&](double v) { return cq::raw::ovr_bce_eps(y, v, scale, thr); }, loc), 1e-6, 1e-9));
    }
}

TEST_CASE_TEMPLATE("ovr_bce_row equals the scalar BCE summed over a row, gradients included", T, float, double) {
  const auto seed = cqtest::test_seed(20261121, "ovr_bce_row vs scalar");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 20.0);
  std::uniform_real_distribution<double> log_scale(-3.0, 3.0);
  for (std::size_t K : {std::size_t(1), std::size_t(7), std::size_t(64), std::size_t(1003)})
    for (bool per_class : {false, true})
      for (std::int64_t label : {std::int64_t(-100), std::int64_t(0), std::int64_t(K / 2), std::int64_t(K - 1)}) {
        std::vector<T> loc(K), scale(K), thr(K), d_loc(K), d_scale(K), d_thr(per_class ? K : 1, T(0));
        for (std::size_t k = 0; k < K; ++k) {
          loc[k] = static_cast<T>(normal(rng));
          scale[k] = static_cast<T>(std::pow(10.0, log_scale(rng)));
          thr[k] = per_class ? static_cast<T>(normal(rng) / 4) : T(10);
        }
        if (K > 10) {  // extremes inside the row
          loc[3] = T(1e30);
          loc[5] = -T(1e30);
          loc[8] = std::numeric_limits<T>::infinity();
          if (label == 8) label = 9;
        }
        const T weight = T(0.5);
        auto thresholds = per_class ? cq::RowThresholds<T>::per_class_span(thr) : cq::RowThresholds<T>::scalar(thr[0]);
        cq::OvrRowStats<T> stats;
        const T loss = cq::ovr_bce_row<T>(loc, scale, thresholds, label, weight, {d_loc.data(), d_scale.data(), d_thr.data()}, &stats);
        LD ref_prob_sum = 0;
        std::int64_t ref_best = -1;
        LD ref_best_z = -INFINITY;
        for (std::size_t k = 0; k < K; ++k) {
          const LD c = per_class ? thr[k] : thr[0];
          ref_prob_sum += cq::raw::ovr_prob<LD>(loc[k], scale[k], c);
          const T z = cq::raw::ovr_margin<T>(loc[k], scale[k], static_cast<T>(c));
          if (z > ref_best_z) ref_best_z = z, ref_best = static_cast<std::int64_t>(k);
        }
        CHECK(cqtest::close_rel(stats.prob_sum, static_cast<double>(ref_prob_sum), 64 * std::numeric_limits<T>::epsilon(), 1));
        CHECK(stats.best_index == ref_best);
        LD ref_loss = 0;
        std::vector<LD> ref_thr(d_thr.size(), 0);
        bool row_ok = true;
        for (std::size_t k = 0; k < K; ++k) {
          const LD y = static_cast<std::int64_t>(k) == label ? 1 : 0;
          const auto g = cq::raw::ovr_bce_grad<LD>(y, loc[k], scale[k], per_class ? thr[k] : thr[0]);
          ref_loss += g.value;
          ref_thr[per_class ? k : 0] += weight * g.d_threshold;
          // per element: within 16 ulp of a long double evaluation (xsimd's atan2/log are ≤ 2 ulp)
          row_ok &= close_ulps(d_loc[k], weight * g.d_loc, 16, 1e-30);
          row_ok &= close_ulps(d_scale[k], weight * g.d_scale, 16, 1e-30);
        }
        CAPTURE(K);
        CAPTURE(per_class);
        CAPTURE(label);
        CHECK(row_ok);
        if (std::isinf(ref_loss)) CHECK(loss == static_cast<T>(ref_loss));
        else CHECK(cqtest::close_rel(loss, static_cast<double>(ref_loss), 64 * std::numeric_limits<T>::epsilon(), 0));
        for (std::size_t k = 0; k < d_thr.size(); ++k)
          CHECK(cqtest::close_rel(d_thr[k], static_cast<double>(ref_thr[k]), 256 * std::numeric_limits<T>::epsilon(), 1e-6));
      }
}

TEST_CASE_TEMPLATE("ovr_prob_row equals the scalar ovr_prob", T, float, double, long double) {
  const auto seed = cqtest::test_seed(7, "ovr_prob_row vs scalar");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 30.0);
  const std::size_t K = 517;
  std::vector<T> loc(K), scale(K, T(2)), prob(K);
  for (auto& l : loc) l = static_cast<T>(normal(rng));
  loc[0] = -T(1e30);
  cq::ovr_prob_row<T>(loc, scale, cq::RowThresholds<T>::scalar(T(10)), prob);
  for (std::size_t k = 0; k < K; ++k) CHECK(close_ulps(prob[k], cq::raw::ovr_prob<LD>(loc[k], scale[k], 10), 8));
}

TEST_CASE_TEMPLATE("ovr_bce_row's argmax breaks ties towards the lowest class", T, float, double) {
  const std::size_t K = 300;  // several SIMD batches
  std::vector<T> loc(K, T(0)), scale(K, T(1));
  loc[40] = loc[7] = loc[299] = loc[170] = T(5);  // equal best margins
  cq::OvrRowStats<T> stats;
  cq::ovr_bce_row<T>(loc, scale, cq::RowThresholds<T>::scalar(T(0)), -100, T(1), {}, &stats);
  CHECK(stats.best_index == 7);
  CHECK(stats.best_margin == T(5));
  CHECK(cqtest::close_rel(stats.prob_sum, 296 * 0.5 + 4 * cq::raw::ovr_prob(5.0, 1.0, 0.0), 1e-5));
  // the scalar path (long double) agrees
  std::vector<long double> locl(loc.begin(), loc.end()), scalel(K, 1.0L);
  cq::OvrRowStats<long double> sl;
  cq::ovr_bce_row<long double>(locl, scalel, cq::RowThresholds<long double>::scalar(0.0L), -100, 1.0L, {}, &sl);
  CHECK(sl.best_index == 7);
}

TEST_CASE_TEMPLATE("ovr_bce_row at infinite margins: a negative at z = -inf costs nothing and has no gradient", T, float, double) {
  // 20 classes (a full SIMD batch and a tail), all negatives: z = -inf gives P = 0, L = 0 and
  // zero gradients; z = +inf gives L = +inf, dL/dloc = 0 and dL/dscale = -1/scale (gz = 1).
  const std::size_t K = 20;
  std::vector<T> loc(K, T(0)), scale(K, T(2)), d_loc(K), d_scale(K);
  const T inf = std::numeric_limits<T>::infinity();
  loc[3] = loc[17] = -inf;
  loc[5] = inf;
  const T loss = cq::ovr_bce_row<T>(loc, scale, cq::RowThresholds<T>::scalar(T(0)), -100, T(1), {d_loc.data(), d_scale.data(), nullptr});
  CHECK(loss == inf);
  for (std::size_t k : {std::size_t(3), std::size_t(17)}) {
    CAPTURE(k);
    CHECK(d_loc[k] == T(0));
    CHECK(d_scale[k] == T(0));
  }
  CHECK(d_loc[5] == T(0));
  CHECK(d_scale[5] == T(-0.5));
  // the finite lanes are the scalar formulas' values (z = 0: L = log 2 each)
  CHECK(cqtest::close_rel(d_loc[0], static_cast<double>(cq::raw::ovr_bce_grad<T>(T(0), T(0), T(2), T(0)).d_loc), 1e-6));
}
