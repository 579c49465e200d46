#include <causalqwen/cauchy.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the sentence of a kind declared outside
// the algebra: ordinary code cannot call two buffers independent individuals.
cq::CauchyView<const float, 2, cq::Kind::independent> declare(cq::TensorView<const float, 2> loc,
                                                               cq::TensorView<const float, 2> scale) {
  return cq::CauchyView<const float, 2, cq::Kind::independent>{loc, scale};
}
