// Uses the Cauchy maths alone: includes only <causalqwen/cauchy.hpp> and links only
// causalqwen::cauchy (no OpenMP, BLAS, oneDNN, MPI, tokenizer or JSON library). Checks the
// quantile as the inverse of the cdf, a one-vs-rest probability against its closed form, a linear
// map of independent Cauchy variables against loc' = W·loc + b, scale' = |W|·scale, and the
// checked functions' refusal of a negative scale (a message formatted with fmt).
#include <causalqwen/cauchy.hpp>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string_view>

namespace {

int failures = 0;

void expect_near(const char* what, double got, double want, double tolerance) {
  if (!(std::abs(got - want) <= tolerance)) {
    std::printf("consumer_cauchy: %s is %.17g, expected %.17g\n", what, got, want);
    ++failures;
  }
}

}  // namespace

int main() {
  // quantile(p) = loc + scale·tan(π(p − ½)) = loc − scale/tan(πp) (the second form keeps the
  // tails' precision), and cdf(quantile(p)) = p
  for (const double p : {1e-9, 0.05, 0.25, 0.5, 0.9, 0.999}) {
    const double x = cq::quantile(p, 2.0, 0.5);
    expect_near("quantile(p, 2, 0.5)", x, 2.0 - 0.5 / std::tan(std::numbers::pi * p), 1e-12 * (1 + std::abs(x)));
    expect_near("cdf(quantile(p))", cq::cdf(x, 2.0, 0.5), p, 1e-14 * p + 1e-16);
  }
  // P(S > 10) for S ~ Cauchy(12, 1) = ½ + atan(2)/π
  expect_near("ovr_prob(12, 1, 10)", cq::ovr_prob(12.0, 1.0, 10.0), 0.5 + std::atan(2.0) / std::numbers::pi, 1e-15);

  // Y = W·U + b for independent U: Cauchy(W·loc + b, |W|·scale)
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{1.0, -2.0, 0.5},
                                                                 xt::xtensor<double, 1>{0.5, 2.0, 1.0});
  const xt::xtensor<double, 2> W = {{1.0, -0.5, 2.0}, {0.0, 3.0, -1.0}};
  const auto Y = cq::linear(W, xt::xtensor<double, 1>{0.1, -0.2}, U);
  expect_near("loc'[0]", Y.loc()(0), 3.1, 1e-15);
  expect_near("loc'[1]", Y.loc()(1), -6.7, 1e-15);
  expect_near("scale'[0]", Y.scale()(0), 3.5, 1e-15);
  expect_near("scale'[1]", Y.scale()(1), 7.0, 1e-15);
  expect_near("the 95% quantile of Y[1]", Y.quantile(0.95)(1), cq::quantile(0.95, -6.7, 7.0), 1e-12);

  bool refused = false;
  try {
    (void)cq::cdf(0.0, 0.0, -1.0);
  } catch (const cq::DomainError& e) {
    refused = std::string_view(e.what()).find("scale must be > 0") != std::string_view::npos;
  }
  if (!refused) {
    std::printf("consumer_cauchy: cdf with scale -1 was not refused with its sentence\n");
    ++failures;
  }
  std::printf("consumer_cauchy: %d wrong value(s); Y = Cauchy((%.3f, %.3f), (%.3f, %.3f))\n", failures,
              Y.loc()(0), Y.loc()(1), Y.scale()(0), Y.scale()(1));
  return failures == 0 ? 0 : 1;
}
