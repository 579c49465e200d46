// GEMM wrappers, the Cauchy scale products and the few-rows kernels of decoding against naive loops
// (the Cauchy linear map itself: test_cauchy_linear.cpp).
#include <causalqwen/core/threading.hpp>
#include <causalqwen/linalg/abs_weight.hpp>
#include <causalqwen/linalg/cauchy_linear.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <causalqwen/linalg/matmul.hpp>
#include <doctest/doctest.h>

#include "../support/float_matrices.hpp"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cq = causalqwen;
using cq::TensorView;

using cqtest::random_vector;
using cqtest::sum_tol;
using cqtest::v2;

TEST_CASE_TEMPLATE("linear products match naive loops", T, float, double) {
  const std::uint64_t seed = 20261121;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t M = 37, K = 23, N = 19;
  auto x = random_vector<T>(M * K, rng), w = random_vector<T>(N * K, rng), b = random_vector<T>(N, rng);
  auto dy = random_vector<T>(M * N, rng);
  std::vector<T> y(M * N), dx(M * K, T(1)), dw(N * K, T(2)), db(N, T(3));
  cq::linalg::linear_forward<T>(v2(y, M, N), v2(x, M, K), v2(w, N, K), TensorView<const T, 1>(b.data(), {N}));
  cq::linalg::linear_backward_input<T>(v2(dx, M, K), v2(dy, M, N), v2(w, N, K));
  cq::linalg::linear_backward_weight<T>(v2(dw, N, K), v2(dy, M, N), v2(x, M, K));
  cq::linalg::bias_backward<T>(TensorView<T, 1>(db.data(), {N}), v2(dy, M, N));
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      double s = b[n];
      for (std::size_t k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
      CHECK(std::abs(y[m * N + n] - s) <= sum_tol<T>(K));
    }
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t k = 0; k < K; ++k) {
      double s = 1;
      for (std::size_t n = 0; n < N; ++n) s += double(dy[m * N + n]) * w[n * K + k];
      CHECK(std::abs(dx[m * K + k] - s) <= sum_tol<T>(N));
    }
  for (std::size_t n = 0; n < N; ++n) {
    double sb = 3;
    for (std::size_t m = 0; m < M; ++m) sb += dy[m * N + n];
    CHECK(std::abs(db[n] - sb) <= sum_tol<T>(M));
    for (std::size_t k = 0; k < K; ++k) {
      double s = 2;
      for (std::size_t m = 0; m < M; ++m) s += double(dy[m * N + n]) * x[m * K + k];
      CHECK(std::abs(dw[n * K + k] - s) <= sum_tol<T>(M));
    }
  }
}

TEST_CASE_TEMPLATE("Cauchy scale products and the |W| cache", T, float, double) {
  const std::uint64_t seed = 7;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t M = 11, K = 9, N = 13;
  auto w = random_vector<T>(N * K, rng), scale = random_vector<T>(M * K, rng), ds = random_vector<T>(M * N, rng);
  for (auto& s : scale) s = std::abs(s) + T(0.1);
  w[5] = T(0);  // sign(0) = 0
  cq::linalg::AbsWeightCache<T> cache;
  auto absw = cache.get(v2(w, N, K), 0);
  CHECK(cache.get(v2(w, N, K), 0).data == absw.data);
  CHECK(cache.rebuilds() == 1);
  std::vector<T> out(M * N), dscale(M * K, T(0)), dw(N * K, T(0));
  const auto W = cq::linalg::Weight<const T>(v2(w, N, K)).with_abs(absw);
  cq::linalg::abs_linear_forward<T>(v2(out, M, N), v2(scale, M, K), W);
  cq::linalg::abs_linear_backward_input<T>(v2(dscale, M, K), v2(ds, M, N), W);
  cq::linalg::abs_linear_backward_weight<T>(v2(dw, N, K), v2(ds, M, N), v2(scale, M, K), v2(w, N, K));
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      double s = 0;
      for (std::size_t k = 0; k < K; ++k) s += double(scale[m * K + k]) * std::abs(double(w[n * K + k]));
      CHECK(std::abs(out[m * N + n] - s) <= sum_tol<T>(K) * 4);
    }
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t k = 0; k < K; ++k) {
      double s = 0;
      for (std::size_t n = 0; n < N; ++n) s += double(ds[m * N + n]) * std::abs(double(w[n * K + k]));
      CHECK(std::abs(dscale[m * K + k] - s) <= sum_tol<T>(N) * 4);
    }
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t k = 0; k < K; ++k) {
      double s = 0;
      for (std::size_t m = 0; m < M; ++m) s += double(ds[m * N + n]) * scale[m * K + k];
      const double sgn = w[n * K + k] > 0 ? 1 : (w[n * K + k] < 0 ? -1 : 0);
      CHECK(std::abs(dw[n * K + k] - sgn * s) <= sum_tol<T>(M) * 4);
    }
  // W changes: a new version rebuilds |W|, so does invalidate().
  w[0] = -w[0] - T(1);
  CHECK(cache.get(v2(w, N, K), 1)[0] == std::abs(w[0]));
  CHECK(cache.rebuilds() == 2);
  cache.invalidate();
  cache.get(v2(w, N, K), 1);
  CHECK(cache.rebuilds() == 3);
}

TEST_CASE("GEMM wrappers reject mismatched shapes") {
  std::vector<float> a(6), b(6), c(4);
  CHECK_THROWS_WITH_AS(cq::linalg::linear_forward<float>(v2(c, 2, 2), v2(a, 2, 3), v2(b, 3, 2)),
                       "causalqwen::linear_forward: W [3,2] does not match X [2,3]", cq::DomainError);
  CHECK_THROWS_WITH_AS(cq::linalg::linear_forward<float>(v2(c, 1, 4), v2(a, 2, 3), v2(b, 2, 3)),
                       "causalqwen::linear_forward: Y must have shape [2,2], got [1,4]", cq::DomainError);
}

TEST_CASE("set_threads(n) gives OpenMP n threads, also when the OpenMP build of OpenBLAS is linked") {
  // that build implements openblas_set_num_threads(1) with omp_set_num_threads(1): set_threads
  // once left every program on one thread
  const int before = omp_get_max_threads();
  for (const std::size_t n : {2u, 1u, 3u}) {
    cq::set_threads(n);
    CHECK(omp_get_max_threads() == static_cast<int>(n));
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    CHECK(team == static_cast<int>(n));
  }
  omp_set_num_threads(before);
}

TEST_CASE_TEMPLATE("matmul gives the same bits on 1 and 2 threads and inside a parallel region", T, float, double) {
  const std::uint64_t seed = 20261124;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  using cq::linalg::Op;
  // shapes cut by columns and by rows, with ragged last blocks and a depth above one BLAS block
  const std::size_t shapes[][3] = {{96, 176, 64}, {1000, 70, 33}, {37, 1500, 300}, {130, 130, 700}};
  const int threads_before = omp_get_max_threads();
  for (const auto& shape : shapes) {
    const std::size_t M = shape[0], N = shape[1], K = shape[2];
    const auto a = random_vector<T>(M * K, rng), b = random_vector<T>(K * N, rng);
    for (const Op op_a : {Op::plain, Op::transposed})
      for (const Op op_b : {Op::plain, Op::transposed}) {
        const std::size_t lda = op_a == Op::plain ? K : M, ldb = op_b == Op::plain ? N : K;
        auto run = [&](int threads, bool nested) {
          std::vector<T> c(M * N, T(0.5));
          omp_set_num_threads(threads);
          if (nested) {
#pragma omp parallel num_threads(2)
            {
#pragma omp single
              cq::linalg::matmul<T>(op_a, op_b, M, N, K, a.data(), lda, b.data(), ldb, c.data(), N, true);
            }
          } else {
            cq::linalg::matmul<T>(op_a, op_b, M, N, K, a.data(), lda, b.data(), ldb, c.data(), N, true);
          }
          return c;
        };
        const auto one = run(1, false), two = run(2, false), inside = run(2, true);
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        CAPTURE(int(op_a));
        CAPTURE(int(op_b));
        CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(T)) == 0);
        CHECK(std::memcmp(one.data(), inside.data(), one.size() * sizeof(T)) == 0);
        // and it is the product: one entry against a double loop
        double expect = 0.5;
        for (std::size_t k = 0; k < K; ++k)
          expect += double(op_a == Op::plain ? a[k] : a[k * lda]) * double(op_b == Op::plain ? b[k * ldb] : b[k]);
        CHECK(std::abs(double(one[0]) - expect) <= sum_tol<T>(K));
      }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE_TEMPLATE("decoding's few-rows and fused Cauchy kernels: a double loop's sums; a row's bits whatever its block, the row count or the threads", T, float, double) {
  const std::uint64_t seed = 20261128;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const int threads_before = omp_get_max_threads();
  // K: shorter than a vector, with a vector tail (not a multiple of four vectors) and a scalar
  // tail; N not a multiple of 4 (single rows after the blocks of four); the last shape large
  // enough to be split over the threads
  const std::size_t shapes[][2] = {{13, 5}, {13, 37}, {10, 64}, {21, 100}, {9, 333}, {301, 333}};
  for (const auto& shape : shapes) {
    const std::size_t N = shape[0], K = shape[1];
    CAPTURE(N);
    CAPTURE(K);
    for (const std::size_t M : {std::size_t(1), std::size_t(3), std::size_t(8)}) {
      CAPTURE(M);
      auto x = random_vector<T>(M * K, rng), w = random_vector<T>(N * K, rng), b = random_vector<T>(N, rng);
      auto scale = random_vector<T>(M * K, rng);
      for (auto& s : scale) s = std::abs(s) + T(0.1);
      const TensorView<const T, 1> bias(b.data(), {N});
      std::vector<T> y(M * N), loc(M * N), sc(M * N);
      const auto cauchy = [&](std::vector<T>& l, std::vector<T>& s, const T* x_rows, const T* scale_rows, std::size_t rows,
                              std::size_t n0, std::size_t n) {
        const auto a = cq::assume_cauchy_view<cq::Kind::independent>(TensorView<const T, 2>(x_rows, {rows, K}),
                                                                     TensorView<const T, 2>(scale_rows, {rows, K}));
        cq::linalg::cauchy_linear<T>(cq::CauchyOut<T, 2>{v2(l, rows, n), v2(s, rows, n)},
                                     TensorView<const T, 2>(w.data() + n0 * K, {n, K}),
                                     TensorView<const T, 1>(b.data() + n0, {n}), a);
      };
      cq::set_threads(2);
      cq::linalg::linear_forward<T>(v2(y, M, N), v2(x, M, K), v2(w, N, K), bias);
      cauchy(loc, sc, x.data(), scale.data(), M, 0, N);
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t n = 0; n < N; ++n) {
          double s = b[n], s_abs = 0;
          for (std::size_t k = 0; k < K; ++k) {
            s += double(x[m * K + k]) * w[n * K + k];
            s_abs += double(scale[m * K + k]) * std::abs(double(w[n * K + k]));
          }
          CHECK(std::abs(y[m * N + n] - s) <= sum_tol<T>(K));
          CHECK(std::abs(loc[m * N + n] - s) <= sum_tol<T>(K));
          CHECK(std::abs(sc[m * N + n] - s_abs) <= sum_tol<T>(K) * 4);
        }
      std::size_t mismatches = 0;
      for (std::size_t m = 0; m < M; ++m) {  // one row of X alone, on one thread
        cq::set_threads(1);
        std::vector<T> y1(N), l1(N), s1(N);
        cq::linalg::linear_forward<T>(v2(y1, 1, N), TensorView<const T, 2>(x.data() + m * K, {1, K}), v2(w, N, K), bias);
        cauchy(l1, s1, x.data() + m * K, scale.data() + m * K, 1, 0, N);
        for (std::size_t n = 0; n < N; ++n)
          mismatches += (y1[n] != y[m * N + n]) + (l1[n] != loc[m * N + n]) + (s1[n] != sc[m * N + n]);
      }
      cq::set_threads(2);
      for (const std::size_t n0 : {std::size_t(1), std::size_t(3)}) {  // rows of W from an unaligned row on
        const std::size_t n = N - n0;
        std::vector<T> yr(M * n), lr(M * n), sr(M * n);
        cq::linalg::linear_forward<T>(v2(yr, M, n), v2(x, M, K), TensorView<const T, 2>(w.data() + n0 * K, {n, K}),
                                      TensorView<const T, 1>(b.data() + n0, {n}));
        cauchy(lr, sr, x.data(), scale.data(), M, n0, n);
        for (std::size_t m = 0; m < M; ++m)
          for (std::size_t i = 0; i < n; ++i)
            mismatches += (yr[m * n + i] != y[m * N + n0 + i]) + (lr[m * n + i] != loc[m * N + n0 + i]) +
                          (sr[m * n + i] != sc[m * N + n0 + i]);
      }
      CHECK(mismatches == 0);
    }
  }
  omp_set_num_threads(threads_before);
}
