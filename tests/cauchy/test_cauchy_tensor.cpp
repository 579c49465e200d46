// CauchyTensor: linear() against a hand loop, batched; linear stability checked empirically
// with Kolmogorov–Smirnov statistics on seeded draws (and the checks shown able to fail on a
// wrong scale rule); fuse_linear exactness; noise addition; affine maps; queries; errors.
#include "../support/test_support.hpp"

#include <causalqwen/cauchy.hpp>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace cq = causalqwen;

namespace {

/// KS statistic sup |F_n(x) − F(x)| of `draws` against Cauchy(loc, scale).
double ks_statistic(std::vector<double> draws, double loc, double scale) {
  std::sort(draws.begin(), draws.end());
  const double n = static_cast<double>(draws.size());
  double d = 0;
  for (std::size_t i = 0; i < draws.size(); ++i) {
    const double f = cq::raw::cdf(draws[i], loc, scale);
    d = std::max({d, std::fabs(f - i / n), std::fabs((i + 1) / n - f)});
  }
  return d;
}

/// KS critical value at significance 0.001: 1.949/√n.
double ks_critical(std::size_t n) { return 1.949 / std::sqrt(static_cast<double>(n)); }

}  // namespace

TEST_CASE_TEMPLATE("linear(W, b, U) = (loc·Wᵀ + b, scale·|W|ᵀ), batched over leading dims", T, float, double) {
  const auto seed = cqtest::test_seed(11, "linear vs loop");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const std::size_t B = 2, S = 3, N = 5, M = 4;
  xt::xtensor<T, 3> loc = xt::empty<T>({B, S, N}), scale = xt::empty<T>({B, S, N});
  for (auto& v : loc) v = static_cast<T>(normal(rng));
  for (auto& v : scale) v = static_cast<T>(std::exp(normal(rng)));
  xt::xtensor<T, 2> W = xt::empty<T>({M, N});
  xt::xtensor<T, 1> b = xt::empty<T>({M});
  for (auto& v : W) v = static_cast<T>(normal(rng));
  for (auto& v : b) v = static_cast<T>(normal(rng));
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(loc, scale);
  const auto Y = cq::linear(W, b, U);
  static_assert(decltype(Y)::kind == cq::Kind::marginal);
  REQUIRE(Y.shape()[2] == M);
  for (std::size_t i = 0; i < B; ++i)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t m = 0; m < M; ++m) {
        double l = b(m), g = 0;
        for (std::size_t n = 0; n < N; ++n) {
          l += double(W(m, n)) * loc(i, s, n);
          g += std::fabs(double(W(m, n))) * scale(i, s, n);
        }
        CHECK(cqtest::close_rel(Y.loc()(i, s, m), l, 16 * std::numeric_limits<T>::epsilon()));
        CHECK(cqtest::close_rel(Y.scale()(i, s, m), g, 16 * std::numeric_limits<T>::epsilon()));
      }
  // without bias
  const auto Y0 = cq::linear(W, xt::xtensor<T, 1>{}, U);
  CHECK(cqtest::close_rel(Y0.loc()(1, 2, 3) + b(3), Y.loc()(1, 2, 3), 16 * std::numeric_limits<T>::epsilon()));
}

TEST_CASE("linear stability, empirically: W·U + b of sampled independent U is Cauchy(W·loc + b, |W|·scale)") {
  const auto seed = cqtest::test_seed(424242, "linear stability KS");
  std::mt19937_64 rng(seed);
  const xt::xtensor<double, 1> loc = {1.0, -2.0, 0.5, 3.0}, scale = {0.5, 2.0, 1.0, 0.1};
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(loc, scale);
  const xt::xtensor<double, 2> W = {{1.0, -0.5, 2.0, 0.0}, {-3.0, 0.25, 1.0, 4.0}, {0.1, 0.1, -0.1, 0.1}};
  const xt::xtensor<double, 1> b = {0.0, 1.0, -5.0};
  const auto Y = cq::linear(W, b, U);
  const std::size_t n = 20000;
  std::vector<std::vector<double>> draws(3);
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = U.sample(rng);
    for (std::size_t m = 0; m < 3; ++m) {
      double y = b(m);
      for (std::size_t j = 0; j < 4; ++j) y += W(m, j) * u(j);
      draws[m].push_back(y);
    }
  }
  for (std::size_t m = 0; m < 3; ++m) {
    const double d = ks_statistic(draws[m], Y.loc()(m), Y.scale()(m));
    CAPTURE(m);
    CHECK(d < ks_critical(n));
    // the test can fail: the Gaussian rule ‖W_m‖₂·scale is rejected
    double l2 = 0;
    for (std::size_t j = 0; j < 4; ++j) l2 += W(m, j) * W(m, j) * scale(j) * scale(j);
    CHECK(ks_statistic(draws[m], Y.loc()(m), std::sqrt(l2)) > ks_critical(n));
  }
}

TEST_CASE("two linear maps: fuse_linear is exact, the |W2|·|W1| rule only bounds the scale") {
  const auto seed = cqtest::test_seed(99, "fused linear KS");
  std::mt19937_64 rng(seed);
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{0.0, 1.0}, xt::xtensor<double, 1>{1.0, 1.0});
  const xt::xtensor<double, 2> W1 = {{1.0, 1.0}, {1.0, -1.0}};
  const xt::xtensor<double, 2> W2 = {{1.0, 1.0}};  // W2·W1 = [2, 0]: the second component cancels
  const xt::xtensor<double, 1> b1 = {0.5, 0.0}, b2 = {1.0};
  const auto fused = cq::fuse_linear(W2, b2, W1, b1);
  CHECK(fused.weight(0, 0) == 2.0);
  CHECK(fused.weight(0, 1) == 0.0);
  CHECK(fused.bias(0) == 1.5);
  const auto Y = cq::linear(fused, U);
  CHECK(Y.scale()(0) == 2.0);  // |W2W1|·γ, where the chained rule would give 4
  std::vector<double> draws;
  const std::size_t n = 20000;
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = U.sample(rng);
    const double h0 = u(0) + u(1) + 0.5, h1 = u(0) - u(1);
    draws.push_back(h0 + h1 + 1.0);
  }
  CHECK(ks_statistic(draws, Y.loc()(0), Y.scale()(0)) < ks_critical(n));
  CHECK(ks_statistic(draws, Y.loc()(0), 4.0) > ks_critical(n));
}

TEST_CASE("adding independent Cauchy noise: scale + |b|, checked empirically") {
  const auto seed = cqtest::test_seed(5150, "noise addition KS");
  std::mt19937_64 rng(seed);
  const auto X = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{2.0, -1.0}, xt::xtensor<double, 1>{0.5, 3.0});
  const xt::xtensor<double, 1> b = {-1.5, 0.2};
  const auto Z = cq::add_noise(X, b);
  static_assert(decltype(Z)::kind == cq::Kind::independent);
  const auto eps = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{0.0, 0.0}, xt::xtensor<double, 1>{1.0, 1.0});
  const std::size_t n = 20000;
  std::vector<std::vector<double>> draws(2);
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = X.sample(rng);
    const auto e = eps.sample(rng);
    for (std::size_t j = 0; j < 2; ++j) draws[j].push_back(x(j) + std::fabs(b(j)) * e(j));
  }
  for (std::size_t j = 0; j < 2; ++j) {
    CHECK(Z.scale()(j) == X.scale()(j) + std::fabs(b(j)));
    CHECK(ks_statistic(draws[j], Z.loc()(j), Z.scale()(j)) < ks_critical(n));
    CHECK(ks_statistic(draws[j], X.loc()(j), X.scale()(j)) > ks_critical(n));  // without noise: rejected
  }
  // the sum of two tensors declared independent
  const auto S = X + cq::assume_independent(X * 2.0);
  CHECK(S.loc()(0) == 6.0);
  CHECK(S.scale()(1) == 9.0);
}

TEST_CASE_TEMPLATE("affine maps, negation, scalar operations and queries", T, float, double) {
  const auto X = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<T, 1>{T(1), T(-2)}, xt::xtensor<T, 1>{T(0.5), T(2)});
  const auto A = cq::affine(X, xt::xtensor<T, 1>{T(-2), T(3)}, xt::xtensor<T, 1>{T(1), T(0)});
  CHECK(A.loc()(0) == T(-1));
  CHECK(A.scale()(0) == T(1));
  CHECK(A.loc()(1) == T(-6));
  CHECK(A.scale()(1) == T(6));
  const auto N = -X;
  CHECK(N.loc()(1) == T(2));
  CHECK(N.scale()(1) == T(2));
  const auto D = X / T(-4) + T(1);
  CHECK(D.loc()(0) == T(0.75));
  CHECK(D.scale()(1) == T(0.5));
  CHECK(X.median()(1) == T(-2));
  CHECK(X.quantile(T(0.75))(0) == doctest::Approx(1.5).epsilon(1e-6));
  CHECK(X.cdf(xt::xtensor<T, 1>{T(1), T(0)})(0) == T(0.5));
  CHECK(X.ovr_prob(T(1))(0) == T(0.5));
  CHECK(X.nll(xt::xtensor<T, 1>{T(1), T(-2)})(1) == doctest::Approx(std::log(M_PI * 2)).epsilon(1e-6));
  CHECK(X.log_sf(xt::xtensor<T, 1>{T(1e30), T(0)})(0) == doctest::Approx(std::log(0.5e-30 / M_PI)).epsilon(1e-5));
  CHECK(X.sample(xt::xtensor<T, 1>{T(0.75), T(0.5)})(1) == T(-2));
}

TEST_CASE("shift_to_draw: loc' = quantile(u; loc, scale) per component, scale and kind kept") {
  const std::vector<double> loc{1.0, -2.0, 0.5, 3.0}, scale{2.0, 0.5, 1.0, 4.0}, u{0.75, 0.5, 0.1, 0.9};
  std::vector<double> drawn(4, 0.0);
  const auto U = cq::assume_cauchy_view<cq::Kind::independent>(cq::TensorView<const double, 2>(loc.data(), {2, 2}),
                                                               cq::TensorView<const double, 2>(scale.data(), {2, 2}));
  const auto X = cq::shift_to_draw(U, cq::TensorView<const double, 2>(u.data(), {2, 2}), cq::TensorView<double, 2>(drawn.data(), {2, 2}));
  static_assert(decltype(X)::kind == cq::Kind::independent);
  CHECK(X.loc.data == drawn.data());
  CHECK(X.scale.data == scale.data());
  CHECK(drawn[0] == doctest::Approx(1.0 + 2.0));  // tan(π/4) = 1
  CHECK(drawn[1] == -2.0);                         // the median
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(drawn[i] == cq::raw::quantile(u[i], loc[i], scale[i]));
    CHECK(cq::raw::cdf(drawn[i], loc[i], scale[i]) == doctest::Approx(u[i]).epsilon(1e-12));
  }
  std::vector<double> short_out(2);
  CHECK(cqtest::error_message<cq::DomainError>([&] {
          (void)cq::shift_to_draw(U, cq::TensorView<const double, 2>(u.data(), {2, 2}), cq::TensorView<double, 2>(short_out.data(), {1, 2}));
        }) == "causalqwen::shift_to_draw: loc of the draw must have shape [2,2], got [1,2]");
}

TEST_CASE("CauchyTensor rejects bad input with clear messages") {
  auto message = [](auto f) { return cqtest::error_message<cq::DomainError>(f); };
  const auto assume = [](xt::xtensor<double, 1> loc, xt::xtensor<double, 1> scale) {
    return cq::assume_cauchy_tensor<cq::Kind::independent>(std::move(loc), std::move(scale));
  };
  CHECK(message([&] { assume(xt::xtensor<double, 1>{1.0, 2.0}, xt::xtensor<double, 1>{1.0, 0.0}); }) ==
        "causalqwen::CauchyTensor: scale must be > 0 everywhere, got 0 at flat index 1");
  CHECK(message([&] { assume(xt::xtensor<double, 1>{1.0}, xt::xtensor<double, 1>{1.0, 1.0}); }) ==
        "causalqwen::CauchyTensor: loc and scale must have the same shape");
  const auto U = assume(xt::xtensor<double, 1>{1.0, 2.0}, xt::xtensor<double, 1>{1.0, 1.0});
  CHECK(message([&] { cq::linear(xt::xtensor<double, 2>{{1.0, 2.0, 3.0}}, xt::xtensor<double, 1>{}, U); }) ==
        "causalqwen::linear: W has 3 columns but the tensor's last dimension is 2");
  CHECK(message([&] { (void)U.quantile(1.0); }) == "causalqwen::CauchyTensor::quantile: p must lie in (0, 1), got 1");
  CHECK(message([&] { (void)(U * 0.0); }) == "causalqwen::operator*: a Cauchy tensor times 0 is a constant, not a Cauchy tensor");
}
