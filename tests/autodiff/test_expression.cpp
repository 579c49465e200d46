// Expression templates: one-pass value and backprop, checked against grad_check, and safe holding.
#include <causalqwen/autodiff/expression.hpp>
#include <causalqwen/autodiff/grad_check.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

namespace cq = causalqwen;
namespace ad = causalqwen::autodiff;
using cq::TensorView;

namespace {
TensorView<double, 1> v1(std::vector<double>& v) { return {v.data(), {v.size()}}; }

/// Checks d/dx of Σ_i r_i·f(x_i) computed by backprop against central differences.
template <class F>
void check_function(std::vector<double> x, const char* name) {
  CAPTURE(name);
  std::vector<double> r(x.size()), y(x.size()), gx(x.size(), 0.0);
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = 0.5 + 0.25 * double(i);
  auto loss = [&] {
    ad::eval(v1(y), ad::apply<F>(ad::constant(v1(x))));
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
    return s;
  };
  ad::backprop(ad::apply<F>(ad::var(v1(x), v1(gx))), v1(r));
  auto res = ad::grad_check(std::span<double>(x), std::span<const double>(gx), loss);
  INFO(res.message());
  CHECK(res.ok);
}
}  // namespace

TEST_CASE("every function of the table: derivative matches central differences") {
  const std::vector<double> x = {-2.5, -0.7, -0.1, 0.3, 1.1, 2.9};
  const std::vector<double> pos = {0.05, 0.4, 1.0, 2.5, 7.0};
  check_function<ad::Neg>(x, "neg");
  check_function<ad::Square>(x, "square");
  check_function<ad::Sqrt>(pos, "sqrt");
  check_function<ad::Exp>(x, "exp");
  check_function<ad::Log>(pos, "log");
  check_function<ad::Log1p>(pos, "log1p");
  check_function<ad::Sigmoid>(x, "sigmoid");
  check_function<ad::Tanh>(x, "tanh");
  check_function<ad::Silu>(x, "silu");
  check_function<ad::Abs>(x, "abs");
  check_function<ad::SignedLog1p>(x, "signed_log1p");
}

TEST_CASE("a fused chain: value and gradients of every leaf in one pass") {
  const std::uint64_t seed = 99;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0, 1);
  const std::size_t n = 50000;  // large enough to take the parallel path
  std::vector<double> g(n), u(n), out(n), dout(n), dg(n, 0.0), du(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) g[i] = d(rng), u[i] = d(rng), dout[i] = d(rng);
  // e = silu(g)·u / (1 + g²) − 3·u + 2
  auto e = ad::silu(ad::var(v1(g), v1(dg))) * ad::var(v1(u), v1(du)) /
               (1.0 + ad::square(ad::var(v1(g), v1(dg)))) - 3.0 * ad::var(v1(u), v1(du)) + 2.0;
  ad::eval(v1(out), e);
  ad::backprop(e, v1(dout));
  for (std::size_t i = 0; i < n; i += 997) {
    const double s = 1 / (1 + std::exp(-g[i])), q = 1 + g[i] * g[i];
    CHECK(out[i] == doctest::Approx(g[i] * s * u[i] / q - 3 * u[i] + 2).epsilon(1e-13));
    const double dsilu = s * (1 + g[i] * (1 - s));
    const double want_dg = dout[i] * u[i] * (dsilu / q - g[i] * s * 2 * g[i] / (q * q));
    const double want_du = dout[i] * (g[i] * s / q - 3);
    CHECK(dg[i] == doctest::Approx(want_dg).epsilon(1e-12));
    CHECK(du[i] == doctest::Approx(want_du).epsilon(1e-12));
  }
}

TEST_CASE("operands: temporaries are held by value, lvalues by reference") {
  std::vector<double> x = {1, 2, 3}, gx(3, 0.0), y(3);
  auto leaf = ad::var(v1(x), v1(gx));
  auto e = ad::exp(ad::var(v1(x), v1(gx))) + 1.0;  // the inner leaf is a temporary
  using E = decltype(e);
  static_assert(!std::is_reference_v<decltype(E::l)>, "a temporary operand is stored by value");
  auto s = ad::silu(leaf);
  auto f = s * 2.0;
  static_assert(!std::is_reference_v<decltype(decltype(s)::e)>, "a leaf (a view) is stored by value");
  static_assert(std::is_reference_v<decltype(decltype(f)::l)>, "an lvalue node is stored by reference");
  ad::eval(v1(y), e);  // evaluated after the full expression that built it ended
  CHECK(y[2] == doctest::Approx(std::exp(3.0) + 1));
  ad::eval(v1(y), f);
  CHECK(y[1] == doctest::Approx(2 * 2 / (1 + std::exp(-2.0))));
}

TEST_CASE("expressions reject operands of different sizes") {
  std::vector<double> a(3), b(4), out(3);
  CHECK_THROWS_WITH_AS(ad::constant(v1(a)) + ad::constant(v1(b)),
                       "causalqwen::autodiff::expression: operands have 3 and 4 elements", cq::DomainError);
  CHECK_THROWS_AS(ad::eval(v1(out), ad::constant(v1(b))), cq::DomainError);
}
