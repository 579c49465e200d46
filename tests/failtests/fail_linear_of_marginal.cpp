#include <causalqwen/cauchy.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence below.
void use(const cq::CauchyTensor<double>& U, const xt::xtensor<double, 2>& W1, const xt::xtensor<double, 2>& W2,
         const xt::xtensor<double, 1>& b) {
  auto Y = cq::linear(W1, b, U);   // fine: independent -> marginal
  auto Z = cq::linear(W2, b, Y);   // refused: a second linear map of a marginal tensor
  (void)Z;
}
