// What the types allow: a CauchyTensor's kind decides which operations keep it Cauchy. The
// refused lines are shown as comments; each is a failtest in tests/failtests/ that must fail to
// compile with exactly the sentence quoted.
#include <causalqwen/cauchy.hpp>

#include <fmt/core.h>

int main() {
  using cq::Kind;
  // the kind comes from the algebra, or from the named escape (the caller's claim):
  const auto U = cq::assume_cauchy_tensor<Kind::independent>(xt::xtensor<double, 1>{0.0, 1.0},
                                                             xt::xtensor<double, 1>{1.0, 2.0});
  // cq::CauchyTensor<double, 1, Kind::independent> V(loc, scale);
  //   error: "a CauchyTensor's kind comes from the algebra (a copy of a typed CauchyView, or the
  //           result of an operation); write causalqwen::assume_cauchy_tensor<Kind::...>(loc, scale) ..."
  const xt::xtensor<double, 2> W1 = {{1.0, 1.0}, {1.0, -1.0}}, W2 = {{1.0, 1.0}};
  const xt::xtensor<double, 1> b1 = {0.0, 0.0}, b2 = {0.0};

  auto Y = cq::linear(W1, b1, U);              // independent -> marginal (exact)
  static_assert(decltype(Y)::kind == Kind::marginal);
  const xt::xtensor<double, 1> noise_scale = {0.1, 0.2};
  auto Y2 = cq::add_noise(-Y * 2.0 + 1.0, noise_scale);  // affine maps and noise: closed
  // auto Z = cq::linear(W2, b2, Y);
  //   error: "causalqwen::linear: a marginal Cauchy tensor has dependent components, so |W|
  //           would only bound its scale; fuse the weights first with causalqwen::fuse_linear(...)"
  auto Z = cq::linear(cq::fuse_linear(W2, b2, W1, b1), U);  // the exact way

  // auto e = exp(U);      "exp of a Cauchy tensor is not Cauchy (it is log-Cauchy); ..."
  // auto r = relu(U);     "relu of a Cauchy tensor is not Cauchy (it has an atom at 0); ..."
  // auto a = abs(U);      "abs of a Cauchy tensor is half-Cauchy, not Cauchy; ..."
  // (log, tanh, silu and softmax likewise)
  // auto p = U * U;       "the product of two Cauchy tensors is not Cauchy; ..."
  // auto q = U / U;       "the quotient of two Cauchy tensors is not Cauchy; ..."
  // auto s = U + U;       "the sum of two Cauchy tensors is Cauchy only if they are independent
  //                        of each other, which their types cannot show; write X +
  //                        causalqwen::assume_independent(Y)."
  // U.mean();             "a Cauchy distribution has no mean; use median() (= loc) or quantile()."
  // U.variance();         "a Cauchy distribution has no variance; ..."
  auto S = U + cq::assume_independent(U * 3.0);  // the caller states independence

  // The same questions, asked without an error:
  static_assert(cq::closed_under_v<cq::ops::linear, decltype(U)>);
  static_assert(!cq::closed_under_v<cq::ops::linear, decltype(Y)>);
  static_assert(!cq::closed_under_v<cq::ops::exp, decltype(U)>);

  fmt::print("Y  = W1·U      : loc ({}, {}), scale ({}, {})  [marginal]\n", Y.loc()(0), Y.loc()(1),
             Y.scale()(0), Y.scale()(1));
  fmt::print("Y2 = -2Y+1+noise: scale ({}, {})\n", Y2.scale()(0), Y2.scale()(1));
  fmt::print("Z  = (W2·W1)·U : loc {}, scale {}  (the chained |W2|·|W1| rule would say {})\n",
             Z.loc()(0), Z.scale()(0), Y.scale()(0) + Y.scale()(1));
  fmt::print("S  = U + 3U'   : scale ({}, {})\n", S.scale()(0), S.scale()(1));
  return 0;
}
