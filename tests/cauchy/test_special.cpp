// softplus, inv_softplus, log_softplus: accuracy against long double evaluations of their
// definitions (safe there because long double's range and precision cover the cases below),
// the extreme ranges, and derivatives against central differences.
#include "../support/test_support.hpp"

#include <causalqwen/cauchy.hpp>

#include <limits>

namespace cq = causalqwen;
using cqtest::close_ulps;
using LD = long double;

namespace {
/// softplus in long double straight from the definition log(1 + eˣ), accurate for |x| ≤ 1e4.
LD ref_softplus(LD x) { return x > 40 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
}  // namespace

TEST_CASE_TEMPLATE("softplus, inv_softplus, log_softplus are accurate over wide ranges", T, float, double) {
  for (double xd = -700; xd <= 700; xd += 3.7) {
    const T x = static_cast<T>(xd);
    const LD ref = ref_softplus(x);
    if (ref < static_cast<LD>(std::numeric_limits<T>::min())) continue;  // underflows in T
    CAPTURE(xd);
    CHECK(close_ulps(cq::softplus(x), ref, 3));
    CHECK(close_ulps(cq::log_softplus(x), std::log(ref), 4, 4 * std::numeric_limits<T>::epsilon()));
  }
  // log_softplus keeps going where softplus underflows: log softplus(x) = x − eˣ/2 + …
  CHECK(cq::log_softplus(T(-1000)) == T(-1000));
  CHECK(close_ulps(cq::log_softplus(T(-60)), LD(-60) - std::exp(LD(-60)) / 2, 2));
  CHECK(cq::softplus(std::numeric_limits<T>::infinity()) == std::numeric_limits<T>::infinity());
  CHECK(cq::softplus(-std::numeric_limits<T>::infinity()) == T(0));
  CHECK(cq::softplus(T(1e30)) == T(1e30));
  // inv_softplus from 1e-30 to 1e30: y + log(−expm1(−y)) against log(expm1(y)) in long double
  for (double yd = 1e-30; yd < 1e30; yd *= 3.1) {
    const T y = static_cast<T>(yd);
    if (y < std::numeric_limits<T>::min() || !(y < std::numeric_limits<T>::max())) continue;
    const LD yl = y;
    const LD ref = yl > 1000 ? yl : std::log(std::expm1(yl));
    CAPTURE(yd);
    CHECK(close_ulps(cq::inv_softplus(y), ref, 4, 4 * std::numeric_limits<T>::epsilon()));
  }
  // γ_init = 10, the abduction network's default scale
  CHECK(close_ulps(cq::softplus(cq::inv_softplus(T(10))), LD(10), 2));
}

TEST_CASE("softplus family derivatives match central differences (double)") {
  for (double x : {-30.0, -5.0, -0.5, 0.0, 0.7, 4.0, 25.0}) {
    CAPTURE(x);
    const auto sp = cq::softplus_grad(x);
    CHECK(sp.value == cq::softplus(x));
    CHECK(cqtest::close_rel(sp.d_x, cqtest::central_difference([](double v) { return cq::softplus(v); }, x), 1e-7, 1e-12));
    const auto ls = cq::log_softplus_grad(x);
    CHECK(ls.value == cq::log_softplus(x));
    CHECK(cqtest::close_rel(ls.d_x, cqtest::central_difference([](double v) { return cq::log_softplus(v); }, x), 1e-7, 1e-12));
  }
  for (double y : {1e-3, 0.1, 1.0, 10.0, 40.0}) {
    CAPTURE(y);
    const auto g = cq::inv_softplus_grad(y);
    CHECK(g.value == cq::inv_softplus(y));
    CHECK(cqtest::close_rel(g.d_x, cqtest::central_difference([](double v) { return cq::raw::inv_softplus(v); }, y, 1e-8), 1e-6, 1e-12));
  }
  CHECK(cq::log_softplus_grad(-1000.0).d_x == 1.0);
  CHECK(cq::softplus_grad(-1000.0).d_x == 0.0);
  CHECK(cq::softplus_grad(1000.0).d_x == 1.0);
}
