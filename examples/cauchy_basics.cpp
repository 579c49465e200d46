// The Cauchy math on its own: one distribution, its quantiles and tails, a linear map of an
// independent Cauchy vector (exact, no sampling), and OvR probabilities with their BCE.
#include <causalqwen/cauchy.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

int main() {
  fmt::print("causalqwen {} — the Cauchy math on its own\n\n", cq::version_string);

  // 1. A distribution: X ~ Cauchy(loc = 2, scale = 0.5)
  const double loc = 2.0, scale = 0.5;
  fmt::print("X ~ Cauchy(loc = {}, scale = {})\n", loc, scale);
  fmt::print("  median = {}, and there is no mean or variance (heavy tails)\n", loc);
  for (double p : {0.05, 0.25, 0.5, 0.75, 0.95})
    fmt::print("  quantile({:4}) = {:9.4f}\n", p, cq::quantile(p, loc, scale));
  fmt::print("  P(X > 1e6)     = {:.6e}  (log: {:.4f}; stable, no 1 − P cancellation)\n",
             cq::sf(1e6, loc, scale), cq::log_sf(1e6, loc, scale));
  fmt::print("  nll(2.3)       = {:.6f}\n\n", cq::nll(2.3, loc, scale));

  // 2. Linear stability: U independent, Y = W·U + b is Cauchy(W·loc + b, |W|·scale) exactly
  // (assume_cauchy_tensor: the example asserts the components' independence itself; in the
  // model the abduction network is what yields independent individuals)
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{1.0, -2.0, 0.5},
                                                                 xt::xtensor<double, 1>{0.5, 2.0, 1.0});
  const xt::xtensor<double, 2> W = {{1.0, -0.5, 2.0}, {0.0, 3.0, -1.0}};
  const xt::xtensor<double, 1> b = {0.1, -0.2};
  const auto Y = cq::linear(W, b, U);  // a marginal Cauchy tensor
  fmt::print("U ~ Cauchy(loc = {}, scale = {}), components independent\n",
             std::vector<double>(U.loc().begin(), U.loc().end()),
             std::vector<double>(U.scale().begin(), U.scale().end()));
  for (std::size_t m = 0; m < 2; ++m)
    fmt::print("  Y[{}] = W[{}]·U + b[{}] ~ Cauchy({:.3f}, {:.3f}); 90% interval [{:.3f}, {:.3f}]\n",
               m, m, m, Y.loc()(m), Y.scale()(m), cq::quantile(0.05, Y.loc()(m), Y.scale()(m)),
               cq::quantile(0.95, Y.loc()(m), Y.scale()(m)));
  fmt::print("  (a second linear() on Y would not compile: fuse the weights with fuse_linear)\n\n");

  // 3. One-vs-rest: P(S_k > C) for decision scores S_k, and the BCE of a label
  const double threshold = 10.0;
  fmt::print("OvR with threshold C = {}: P(S > C) = 1/2 + atan((loc - C)/scale)/pi\n", threshold);
  fmt::print("  {:>10} {:>8} {:>12} {:>14} {:>14}\n", "loc_S", "scale_S", "P", "BCE(y=1)", "BCE(y=0)");
  for (auto [l, s] : std::vector<std::pair<double, double>>{{12.0, 1.0}, {10.0, 5.0}, {-30.0, 2.0}, {-1e20, 1.0}})
    fmt::print("  {:>10.3g} {:>8.3g} {:>12.4e} {:>14.6g} {:>14.6g}\n", l, s, cq::ovr_prob(l, s, threshold),
               cq::ovr_bce(1.0, l, s, threshold), cq::ovr_bce(0.0, l, s, threshold));
  fmt::print("  (the last row: the eps form -log(P + 1e-7) would cap BCE(y=1) at {:.3f})\n",
             cq::ovr_bce_eps(1.0, -1e20, 1.0, threshold));
  return 0;
}
