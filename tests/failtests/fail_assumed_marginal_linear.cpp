#include <causalqwen/linalg/cauchy_linear.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the linear-map sentence.
// The escape declares a view's kind, but does not launder the rules: a view assumed marginal
// still cannot go through the linear map, whatever the kind of the buffers it came from.
void linear_of_assumed(cq::TensorView<const float, 2> loc, cq::TensorView<const float, 2> scale,
                       cq::TensorView<const float, 2> w, cq::CauchyOut<float, 2> out) {
  const auto S = cq::assume_cauchy_view<cq::Kind::marginal>(loc, scale);
  cq::linalg::cauchy_linear<float>(out, w, {}, S);
}
