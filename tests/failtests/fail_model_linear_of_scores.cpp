#include <causalqwen/model.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the linear-map sentence.
// A model-level function that pushes the action's class scores S (marginal) through the class
// weights once more, as a second action would: |W|·|W|·γ only bounds the true scale.
template <class T>
void second_action(const typename cq::model::Action<T>::Params& p, cq::model::ClassScores<const T> S,
                   cq::CauchyOut<T, 2> out) {
  cq::model::Action<T>::classes(p, S, 0, out.loc.shape[1], {}, out);
}
template void second_action<float>(const cq::model::Action<float>::Params&, cq::model::ClassScores<const float>,
                                   cq::CauchyOut<float, 2>);
