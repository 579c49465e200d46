// Uses the installed headers and target: prints the median and 90% interval of a linear map.
#include <causalqwen/cauchy.hpp>

#include <cstdio>

int main() {
  const auto U = cq::assume_cauchy_tensor<cq::Kind::independent>(xt::xtensor<double, 1>{1.0, 2.0}, xt::xtensor<double, 1>{0.5, 0.5});
  const auto Y = cq::linear(xt::xtensor<double, 2>{{1.0, -1.0}}, xt::xtensor<double, 1>{0.0}, U);
  std::printf("consumer: median %.3f, 90%% interval [%.3f, %.3f]\n", Y.median()(0),
              Y.quantile(0.05)(0), Y.quantile(0.95)(0));
  return Y.scale()(0) == 1.0 ? 0 : 1;
}
