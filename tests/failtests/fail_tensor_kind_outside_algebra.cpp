#include <causalqwen/cauchy.hpp>
#include <utility>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence of a kind declared outside
// the algebra: ordinary code cannot call two containers an owning tensor of independent
// individuals (the escape is cq::assume_cauchy_tensor<Kind::independent>(loc, scale)).
cq::CauchyTensor<double, 1, cq::Kind::independent> declare(xt::xtensor<double, 1> loc, xt::xtensor<double, 1> scale) {
  return cq::CauchyTensor<double, 1, cq::Kind::independent>(std::move(loc), std::move(scale));
}
