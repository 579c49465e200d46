#include <causalqwen/cauchy.hpp>
#include <utility>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the linear-map sentence.
// The tensors' escape declares a kind, but does not launder the rules: a tensor assumed marginal
// still cannot go through a linear map.
void linear_of_assumed(xt::xtensor<double, 1> loc, xt::xtensor<double, 1> scale, const xt::xtensor<double, 2>& W,
                       const xt::xtensor<double, 1>& b) {
  const auto S = cq::assume_cauchy_tensor<cq::Kind::marginal>(std::move(loc), std::move(scale));
  auto Y = cq::linear(W, b, S);
  (void)Y;
}
