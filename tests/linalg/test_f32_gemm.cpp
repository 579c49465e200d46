// The library's own float product (linalg/f32_gemm.hpp), C = op(A)·op(B) (+ C), each output one
// chain of fused multiply-adds over k: the AVX-512 and AVX2 kernels (each where the CPU runs it)
// give the portable loop's bits for every
// transposition, with and without accumulation, across the tails of its tiles and blocks; a row
// computed alone, on one thread, or inside a parallel region gives the same bits as in a whole
// product on two threads; both agree with a double loop within the bound of a K-term float sum;
// nothing outside C's columns is written; infinities and NaN stay in their row and column;
// linalg::matmul runs on it for float when the CPU has AVX-512F or AVX2.
#include "../support/float_matrices.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/linalg/f32_gemm.hpp>
#include <causalqwen/linalg/matmul.hpp>
#include <doctest/doctest.h>
#include <omp.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace la = causalqwen::linalg;
using cqtest::normal_vector;

namespace {
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// The instruction-set kernels this CPU runs, as set_f32_kernel names them, with their names.
std::vector<std::pair<la::F32Kernel, std::string>> hardware_kernels() {
  std::vector<std::pair<la::F32Kernel, std::string>> kernels;
  if (la::detail_f32::cpu_has_avx512f()) kernels.emplace_back(la::F32Kernel::automatic, "AVX-512");
  if (la::detail_f32::cpu_has_avx2_fma()) kernels.emplace_back(la::F32Kernel::avx2, "AVX2");
  return kernels;
}

/// Elements of `a` and `b` whose bits differ.
std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += !same_bits(a[i], b[i]);
  return n;
}

/// One product's operands: op(A) [M,K], op(B) [K,N], stored with a leading dimension two
/// larger than their rows' width (so that the kernel must honour it), and C [M, N] with ldc N + 3.
struct Problem {
  std::size_t M, N, K;
  bool ta, tb;
  std::size_t lda, ldb, ldc;
  std::vector<float> a, b, c0;
  Problem(std::size_t m, std::size_t n, std::size_t k, bool ta_, bool tb_, std::mt19937_64& rng)
      : M(m), N(n), K(k), ta(ta_), tb(tb_), lda((ta_ ? m : k) + 2), ldb((tb_ ? k : n) + 2), ldc(n + 3),
        a(normal_vector((ta_ ? k : m) * lda, rng)), b(normal_vector((tb_ ? n : k) * ldb, rng)), c0(normal_vector(m * ldc, rng)) {}
  float a_at(std::size_t i, std::size_t k) const { return ta ? a[k * lda + i] : a[i * lda + k]; }
  float b_at(std::size_t k, std::size_t j) const { return tb ? b[j * ldb + k] : b[k * ldb + j]; }
  /// C after the product on `kernel` (C starts as c0, so the columns past N hold c0's values).
  std::vector<float> run(la::F32Kernel kernel, bool accumulate) const {
    la::set_f32_kernel(kernel);
    std::vector<float> c = c0;
    la::f32_matmul(ta, tb, M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
    la::set_f32_kernel(la::F32Kernel::automatic);
    return c;
  }
};

// M: one row, a tile of 12, a tile and a tail, the thread split's tails; N: one column, tails of
// the 32-column panels, more than one 3,072-column block (the last of one panel, so shared by the
// threads; or of six and a tail, each thread packing its own); K: one, tails of the 16-deep
// packing, one block of 512, three blocks (the last shallower)
constexpr std::array<std::array<std::size_t, 3>, 9> shapes{{{1, 1, 1},
                                                            {12, 32, 16},
                                                            {13, 33, 17},
                                                            {5, 100, 7},
                                                            {97, 47, 513},
                                                            {300, 70, 1100},
                                                            {26, 3100, 20},
                                                            {150, 64, 64},
                                                            {40, 3239, 1100}}};
}  // namespace

TEST_CASE("f32 product: the AVX-512 and AVX2 kernels give the portable loop's bits, all within a float sum's bound of a double loop") {
  const std::uint64_t seed = cqtest::test_seed(20261125, "f32 product kernels");
  std::mt19937_64 rng(seed);
  const auto kernels = hardware_kernels();
  for (const auto& [kernel, name] : kernels) MESSAGE("this CPU runs the " << name << " kernel: compared with the portable loop");
  if (kernels.empty()) MESSAGE("this CPU has neither AVX-512F nor AVX2 with FMA: the portable loop only");
  for (const auto [M, N, K] : shapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const bool accumulate : {false, true}) {
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(accumulate);
          const Problem p(M, N, K, ta, tb, rng);
          const auto portable = p.run(la::F32Kernel::portable, accumulate);
          for (const auto& [kernel, name] : kernels) {
            CAPTURE(name);
            CHECK(differing(p.run(kernel, accumulate), portable) == 0);
          }
          std::size_t outside = 0, beyond_bound = 0;
          for (std::size_t m = 0; m < M; ++m) {
            for (std::size_t j = N; j < p.ldc; ++j) outside += !same_bits(portable[m * p.ldc + j], p.c0[m * p.ldc + j]);
            for (std::size_t n = 0; n < N; ++n) {
              double s = accumulate ? p.c0[m * p.ldc + n] : 0.0, magnitude = std::abs(s);
              for (std::size_t k = 0; k < K; ++k) {
                const double term = double(p.a_at(m, k)) * p.b_at(k, n);
                s += term;
                magnitude += std::abs(term);
              }
              // K fused multiply-adds, one rounding each: |error| ≤ (K + 1)·2⁻²⁴·Σ|terms|
              beyond_bound += !(std::abs(portable[m * p.ldc + n] - s) <= double(K + 1) * 0x1p-24 * magnitude);
            }
          }
          CHECK(outside == 0);
          CHECK(beyond_bound == 0);
        }
}

TEST_CASE("f32 product: a row's bits do not depend on the other rows, the row count or the threads") {
  const std::uint64_t seed = cqtest::test_seed(20261126, "f32 product rows");
  std::mt19937_64 rng(seed);
  const auto kernels = hardware_kernels();
  if (kernels.empty()) {
    MESSAGE("this CPU has neither AVX-512F nor AVX2: the portable loop's rows are independent by construction");
    return;
  }
  const int threads = omp_get_max_threads();
  for (const auto& [kernel, name] : kernels)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
      CAPTURE(name);
      CAPTURE(ta);
      CAPTURE(tb);
      la::set_f32_kernel(kernel);
      const Problem p(517, 3300, 600, ta, tb, rng);  // threaded, two column blocks, two depth blocks
      omp_set_num_threads(2);
      const auto whole = p.run(kernel, false);
      omp_set_num_threads(1);
      CHECK(differing(p.run(kernel, false), whole) == 0);
      omp_set_num_threads(threads);
      la::set_f32_kernel(kernel);  // run() set it back to automatic
      for (const std::size_t row : {std::size_t{0}, std::size_t{13}, std::size_t{516}}) {  // alone, as a decoding step would
        CAPTURE(row);
        std::vector<float> alone(p.N);
        const float* a_row = ta ? p.a.data() + row : p.a.data() + row * p.lda;
        la::f32_matmul(ta, tb, 1, p.N, p.K, a_row, p.lda, p.b.data(), p.ldb, alone.data(), p.N, false);
        std::size_t differ = 0;
        for (std::size_t n = 0; n < p.N; ++n) differ += !same_bits(alone[n], whole[row * p.ldc + n]);
        CHECK(differ == 0);
      }
      std::vector<float> inside(p.M * p.ldc);  // rows split between the threads of a parallel region
#pragma omp parallel for num_threads(2) schedule(static)
      for (int half = 0; half < 2; ++half) {
        const std::size_t r0 = half == 0 ? 0 : 200, rows = half == 0 ? 200 : p.M - 200;
        const float* a_rows = ta ? p.a.data() + r0 : p.a.data() + r0 * p.lda;
        la::f32_matmul(ta, tb, rows, p.N, p.K, a_rows, p.lda, p.b.data(), p.ldb, inside.data() + r0 * p.ldc, p.ldc, false);
      }
      std::size_t differ = 0;
      for (std::size_t m = 0; m < p.M; ++m)
        for (std::size_t n = 0; n < p.N; ++n) differ += !same_bits(inside[m * p.ldc + n], whole[m * p.ldc + n]);
      CHECK(differ == 0);
      la::set_f32_kernel(la::F32Kernel::automatic);
    }
}

TEST_CASE("f32 product: the threads split the rows, or the panels of B when op(B) is at least as wide as op(A) is tall") {
  namespace d = la::detail_f32;
  using A = d::Avx512;  // tiles of 12 rows, blocks of 240
  // prefill's 512 tokens × 4,864 columns: two slices of 48 panels, each thread reading only its own
  CHECK(d::split_for(512, 4864, 96, 2, A::mr, A::mc).n_splits == 2);
  CHECK(d::split_for(128, 896, 28, 2, A::mr, A::mc).n_splits == 2);
  // a weight's gradient, 4,864 rows × 896 columns: the rows, A packed once
  CHECK(d::split_for(4864, 896, 28, 2, A::mr, A::mc).n_splits == 1);
  // three panels deal out 2 + 1: the rows (48 + 48, or 200 a block), more even by more than 5 %
  CHECK(d::split_for(96, 96, 3, 2, A::mr, A::mc).n_splits == 1);
  CHECK(d::split_for(2000, 96, 3, 2, A::mr, A::mc).n_splits == 1);
  // one thread: no split
  CHECK(d::split_for(512, 4864, 96, 1, A::mr, A::mc).n_splits == 1);
}

TEST_CASE("f32 product: infinities and NaN stay in their row and column; an empty sum; matmul runs on it") {
  std::mt19937_64 rng(cqtest::test_seed(20261127, "f32 product specials"));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Problem p(30, 40, 50, false, true, rng);
  p.a[7 * p.lda + 3] = inf;  // row 7 of A
  p.b[11 * p.ldb + 5] = nan;  // column 11 of op(B)
  const auto c = p.run(la::F32Kernel::automatic, false);
  CHECK(differing(c, p.run(la::F32Kernel::portable, false)) == 0);
  CHECK(differing(p.run(la::F32Kernel::avx2, false), c) == 0);  // AVX2 where the CPU has it, else portable
  std::size_t wrong = 0;
  for (std::size_t m = 0; m < p.M; ++m)
    for (std::size_t n = 0; n < p.N; ++n) {
      const float v = c[m * p.ldc + n];
      wrong += (m == 7 || n == 11) ? !(std::isinf(v) || std::isnan(v)) || (n == 11 && !std::isnan(v)) : !std::isfinite(v);
    }
  CHECK(wrong == 0);
  // K = 0: C = 0, or C unchanged
  std::vector<float> c2(6, 5.0f);
  la::f32_matmul(false, false, 2, 3, 0, p.a.data(), 1, p.b.data(), 3, c2.data(), 3, true);
  CHECK(c2 == std::vector<float>(6, 5.0f));
  la::f32_matmul(false, false, 2, 3, 0, p.a.data(), 1, p.b.data(), 3, c2.data(), 3, false);
  CHECK(c2 == std::vector<float>(6, 0.0f));
  // linalg::matmul<float> is this product on an AVX-512F or AVX2 CPU (without oneDNN)
#ifndef CAUSALQWEN_ONEDNN
  if (const auto kernels = hardware_kernels(); !kernels.empty()) {
    const Problem q(64, 90, 300, true, false, rng);
    std::vector<float> via_matmul = q.c0;
    la::matmul<float>(la::Op::transposed, la::Op::plain, q.M, q.N, q.K, q.a.data(), q.lda, q.b.data(), q.ldb, via_matmul.data(), q.ldc,
                      true);
    CHECK(differing(via_matmul, q.run(la::F32Kernel::automatic, true)) == 0);
    CHECK(std::string(la::f32_kernel_name()) == kernels.front().second);
  }
#endif
}
