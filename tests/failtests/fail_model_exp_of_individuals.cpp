#include <causalqwen/model.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the exp sentence.
// A model-level function that turns the abduction network's individuals U into "log-normal
// individuals" by exp: exp of a Cauchy variable is not Cauchy.
template <class T>
auto exp_individuals(const typename cq::model::Abduction<T>::Params& p, cq::TensorView<const T, 2> z,
                     typename cq::model::Abduction<T>::Cache& cache) {
  const auto U = cq::model::Abduction<T>::forward(p, z, cache);  // independent Cauchy [M,C]
  return exp(U);
}
template auto exp_individuals<float>(const cq::model::Abduction<float>::Params&, cq::TensorView<const float, 2>,
                                     cq::model::Abduction<float>::Cache&);
