// The Cauchy linear map of the model's weights (linalg/cauchy_linear.hpp), in float and double:
// the one-position form against a double loop, and the matrix form (the fused pass of decoding,
// R <= fused_rows_max, and the two GEMMs beyond) against the algebra's own linear
// (cauchy/operations.hpp), the one the owning CauchyTensor forwards to: the two agree within
// the sums' rounding, and both return a marginal view. The decoding kernels' bits across row
// counts and threads are checked in test_gemm.cpp.
#include <causalqwen/cauchy/operations.hpp>
#include <causalqwen/linalg/cauchy_linear.hpp>
#include <doctest/doctest.h>

#include "../support/float_matrices.hpp"

#include <cmath>
#include <random>
#include <vector>

namespace cq = causalqwen;
using cq::TensorView;

using cqtest::random_vector;
using cqtest::sum_tol;

TEST_CASE_TEMPLATE("the one-position Cauchy linear map: b + Σ_j loc_j·w_j and Σ_j scale_j·|w_j|; a wrong length refused", T,
                   float, double) {
  const std::uint64_t seed = 11;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t M = 3, C = 37;
  auto w = random_vector<T>(C, rng), loc = random_vector<T>(M * C, rng), scale = random_vector<T>(M * C, rng);
  for (auto& s : scale) s = std::abs(s) + T(0.1);
  w[4] = T(0);
  const T b = T(0.25);
  const auto A = cq::assume_cauchy_view<cq::Kind::independent>(TensorView<const T, 2>(loc.data(), {M, C}),
                                                               TensorView<const T, 2>(scale.data(), {M, C}));
  for (std::size_t m = 0; m < M; ++m) {
    const auto y = cq::linalg::cauchy_linear<T>(TensorView<const T, 2>(w.data(), {1, C}), 0, b, cq::row_of(A, m));
    double l = b, s = 0;
    for (std::size_t j = 0; j < C; ++j) {
      l += double(loc[m * C + j]) * w[j];
      s += double(scale[m * C + j]) * std::abs(double(w[j]));
    }
    CHECK(std::abs(y.loc - l) <= sum_tol<T>(C) * 4);
    CHECK(std::abs(y.scale - s) <= sum_tol<T>(C) * 4);
  }
  CHECK_THROWS(cq::linalg::cauchy_linear<T>(TensorView<const T, 2>(w.data(), {1, C - 1}), 0, b, cq::row_of(A, 0)));
  CHECK_THROWS(cq::row_of(A, M));
}

TEST_CASE_TEMPLATE("the weights' Cauchy linear map agrees with the algebra's linear, fused and GEMM paths", T, float, double) {
  const std::uint64_t seed = 20261204;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t N = 29, C = 45;  // N not a multiple of the fused pass's blocks of four
  auto w = random_vector<T>(N * C, rng), b = random_vector<T>(N, rng);
  w[3] = T(0);
  std::vector<T> abs_w(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) abs_w[i] = std::fabs(w[i]);
  const TensorView<const T, 2> W(w.data(), {N, C}), W_abs(abs_w.data(), {N, C});
  const TensorView<const T, 1> bias(b.data(), {N});
  for (const std::size_t R : {std::size_t(1), std::size_t(5), cq::linalg::fused_rows_max, cq::linalg::fused_rows_max + 7}) {
    CAPTURE(R);
    auto loc = random_vector<T>(R * C, rng), scale = random_vector<T>(R * C, rng);
    for (auto& s : scale) s = std::abs(s) + T(1e-3);
    const auto A = cq::assume_cauchy_view<cq::Kind::independent>(TensorView<const T, 2>(loc.data(), {R, C}),
                                                                 TensorView<const T, 2>(scale.data(), {R, C}));
    std::vector<T> l1(R * N), s1(R * N), l2(R * N), s2(R * N);
    const auto S1 = cq::linalg::cauchy_linear<T>(cq::CauchyOut<T, 2>{{l1.data(), {R, N}}, {s1.data(), {R, N}}},
                                                 cq::linalg::Weight<const T>(W).with_abs(W_abs), bias, A);
    const auto S2 = cq::linear(W, bias, A, cq::CauchyOut<T, 2>{{l2.data(), {R, N}}, {s2.data(), {R, N}}});
    static_assert(decltype(S1)::kind == cq::Kind::marginal && decltype(S2)::kind == cq::Kind::marginal);
    for (std::size_t i = 0; i < R * N; ++i) {
      CAPTURE(i);
      CHECK(std::abs(l1[i] - l2[i]) <= sum_tol<T>(C));
      CHECK(std::abs(s1[i] - s2[i]) <= sum_tol<T>(C) * (1 + std::abs(s2[i])));
      CHECK(s1[i] > T(0));
    }
    for (std::size_t r = 0; r < R; ++r) {  // the one-position form gives row r's components too
      const auto y = cq::linalg::cauchy_linear<T>(cq::linalg::Weight<const T>(W), N - 1, b[N - 1], cq::row_of(A, r));
      CHECK(std::abs(y.loc - l2[r * N + N - 1]) <= sum_tol<T>(C));
      CHECK(std::abs(y.scale - s2[r * N + N - 1]) <= sum_tol<T>(C) * (1 + std::abs(y.scale)));
    }
  }
}
