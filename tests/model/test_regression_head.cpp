// model/regression_head.hpp: the Gaussian NLL and the half squared error with their partials
// against central differences (autodiff::grad_check) in float and double, at ordinary and
// extreme inputs (|r| up to 1e30, scales from 1e-20 to 1e20, r = 1 where ∂/∂σ vanishes); where
// the true value passes the type's largest finite value the type must say +∞ or −∞; the Cauchy
// reading is raw::nll_grad bit for bit; the names parse and print back.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/model/regression_head.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <span>
#include <vector>

namespace cq = causalqwen;
using cq::model::RegHead;

namespace {

struct Point {
  double y, loc, scale;
};

/// Ordinary and extreme (y, loc, scale): |r| = |y − loc|/scale from 0 to 1e30.
const std::vector<Point>& points() {
  static const std::vector<Point> p = {{0.3, 0.0, 1.0},   {-4.0, 1.0, 2.0},   {1.0, 0.0, 1.0},     {-1.0, 0.5, 1.5},
                                       {25.0, -3.0, 0.7}, {1.1, 1.0, 0.01},   {2e-20, 1e-20, 1e-20}, {1e6, 0.0, 1e-3},
                                       {3e20, -1e20, 1e20}, {-7e15, 0.0, 0.07}, {1e30, 0.0, 1.0},  {0.0, 0.0, 3.0}};
  return p;
}

/// The partials of `head`'s loss at p (computed in T) checked by grad_check against central
/// differences of the loss in double, in coordinates scaled to the point: y and loc in units of
/// u = max(scale, |y − loc|), scale in units of scale (so that a step of 1e-5 is relative). A
/// partial whose true value passes T's largest finite value must be the infinity of its sign.
template <class T>
void check_point(RegHead head, const Point& p) {
  const T y = static_cast<T>(p.y), loc = static_cast<T>(p.loc), scale = static_cast<T>(p.scale);
  const double yd = y, locd = loc, scaled = scale;  // the rounded inputs, in double
  const auto g = cq::model::regression_loss_grad(head, y, loc, scale);
  const auto exact = cq::model::regression_loss_grad(head, yd, locd, scaled);
  const double unit = std::max(scaled, std::fabs(yd - locd));
  const std::array<double, 3> units = {unit, unit, scaled};
  const std::array<double, 3> exact_partials = {-exact.d_loc, exact.d_loc, exact.d_scale};  // ∂/∂y = −∂/∂loc
  const std::array<double, 3> analytic_raw = {-static_cast<double>(g.d_loc), static_cast<double>(g.d_loc),
                                              static_cast<double>(g.d_scale)};
  INFO(cq::model::reg_head_name(head), " at y = ", yd, ", loc = ", locd, ", scale = ", scaled);
  constexpr double largest = static_cast<double>(std::numeric_limits<T>::max());
  if (std::fabs(exact.value) > largest) {
    CHECK(g.value == std::numeric_limits<T>::infinity());
  } else {
    CHECK(cqtest::close_rel(static_cast<double>(g.value), exact.value, std::is_same_v<T, float> ? 1e-6 : 1e-14, 1e-30));
  }
  std::vector<double> theta = {yd / unit, locd / unit, scaled / scaled}, analytic;
  std::vector<std::size_t> checked;
  for (std::size_t i = 0; i < 3; ++i) {
    if (std::fabs(exact_partials[i]) > largest) {  // beyond T: the sign's infinity
      CHECK(std::isinf(analytic_raw[i]));
      CHECK((analytic_raw[i] > 0) == (exact_partials[i] > 0));
    }
    analytic.push_back(analytic_raw[i] * units[i]);
  }
  const auto loss = [&] {
    return cq::model::regression_loss_grad(head, theta[0] * unit, theta[1] * unit, theta[2] * scaled).value;
  };
  cq::autodiff::GradCheckOptions options;
  options.rtol = std::is_same_v<T, float> ? 2e-5 : 1e-7;
  options.floor = 1.0;  // in these units a partial is O(1) or larger; the truncation error is ~h² = 1e-10
  const bool representable = std::fabs(exact_partials[0]) * unit <= largest && std::fabs(exact_partials[2]) * scaled <= largest;
  if (!representable) return;  // the infinities were checked above
  const auto r = cq::autodiff::grad_check(std::span<double>(theta), std::span<const double>(analytic), loss, options);
  INFO(r.message());
  CHECK(r.ok);
}

}  // namespace

TEST_CASE_TEMPLATE("Gaussian NLL and ½·squared error: partials match central differences, extreme inputs included", T, float,
                   double) {
  for (const auto& p : points()) {
    check_point<T>(RegHead::gaussian, p);
    check_point<T>(RegHead::mse, p);
  }
}

TEST_CASE_TEMPLATE("the losses by hand", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const double half_log_two_pi = 0.5 * std::log(2 * std::numbers::pi);
  // N(1, 2²) at y = 4: r = 1.5, NLL = ½log 2π + log 2 + 1.125; ∂/∂μ = −r/σ = −0.75; ∂/∂σ = (1 − r²)/σ = −0.625
  const auto g = cq::model::gaussian_nll_grad(T(4), T(1), T(2));
  CHECK(cqtest::close_rel(g.value, half_log_two_pi + std::log(2.0) + 1.125, tol));
  CHECK(cqtest::close_rel(g.d_loc, -0.75, tol));
  CHECK(cqtest::close_rel(g.d_scale, -0.625, tol));
  // at r = ±1 the σ-partial is exactly 0
  CHECK(cq::model::gaussian_nll_grad(T(3), T(1), T(2)).d_scale == T(0));
  CHECK(cq::model::gaussian_nll_grad(T(-1), T(1), T(2)).d_scale == T(0));
  // ½(y − c)² at y = 4, c = 1: 4.5, ∂/∂c = −3, nothing for the scale
  const auto m = cq::model::regression_loss_grad(RegHead::mse, T(4), T(1), T(123));
  CHECK(m.value == T(4.5));
  CHECK(m.d_loc == T(-3));
  CHECK(m.d_scale == T(0));
  // r = 1e30 in float: ½r² is beyond float, +∞, and so is −∂/∂σ
  if constexpr (std::is_same_v<T, float>) {
    const auto big = cq::model::gaussian_nll_grad(1e30f, 0.0f, 1.0f);
    CHECK(big.value == std::numeric_limits<float>::infinity());
    CHECK(big.d_scale == -std::numeric_limits<float>::infinity());
    CHECK(big.d_loc == -1e30f);
  }
}

TEST_CASE_TEMPLATE("the Cauchy reading is raw::nll_grad bit for bit", T, float, double) {
  for (const auto& p : points()) {
    const T y = static_cast<T>(p.y), loc = static_cast<T>(p.loc), scale = static_cast<T>(p.scale);
    const auto a = cq::model::regression_loss_grad(RegHead::cauchy, y, loc, scale);
    const auto b = cq::raw::nll_grad(y, loc, scale);
    CHECK(a.value == b.value);
    CHECK(a.d_loc == b.d_loc);
    CHECK(a.d_scale == b.d_scale);
  }
}

TEST_CASE("reg_head names parse and print back; other names are refused") {
  for (auto head : cq::model::reg_heads) {
    RegHead parsed = RegHead::cauchy;
    CHECK(cq::model::parse_reg_head(cq::model::reg_head_name(head), parsed));
    CHECK(parsed == head);
  }
  RegHead untouched = RegHead::gaussian;
  CHECK_FALSE(cq::model::parse_reg_head("laplace", untouched));
  CHECK_FALSE(cq::model::parse_reg_head("", untouched));
  CHECK(untouched == RegHead::gaussian);
  CHECK(cq::model::has_scale(RegHead::gaussian));
  CHECK_FALSE(cq::model::has_scale(RegHead::mse));
}
