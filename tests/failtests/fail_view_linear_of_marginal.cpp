#include <causalqwen/cauchy/operations.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the linear-map sentence.
// The operations over views (the one linear of the algebra, which the tensors' linear forwards
// to) refuse a marginal input as the model's typed linear map does.
cq::CauchyView<float, 2, cq::Kind::marginal> second_linear(cq::CauchyView<const float, 2, cq::Kind::marginal> S,
                                                           cq::TensorView<const float, 2> W, cq::CauchyOut<float, 2> out) {
  return cq::linear(W, {}, S, out);
}
