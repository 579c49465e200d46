#include <causalqwen/model.hpp>
namespace cq = causalqwen;
// Must not compile; ctest requires the compiler to print the linear-map sentence.
// The value head Y computed from one position of the class scores S (marginal) instead of the
// action's output A (independent): |w_reg|·scale_S only bounds the true scale.
template <class T>
cq::CauchyParams<T> value_of_scores(const typename cq::model::Action<T>::Params& p, cq::model::ClassScores<const T> S) {
  return cq::model::Action<T>::value(p, cq::row_of(S, 0));
}
template cq::CauchyParams<float> value_of_scores<float>(const cq::model::Action<float>::Params&,
                                                        cq::model::ClassScores<const float>);
