// Packed bf16 / int8 weights: the packing rules, and the linear and fused Cauchy kernels reading
// a packed copy against the float kernels reading the rounded float matrix. (The bf16 product of
// the linear layers has its own tests: test_bf16_gemm.)
#include "../support/float_matrices.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/linalg/cauchy_linear.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <causalqwen/linalg/packed_weight.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;

namespace {
using cqtest::c2;
using cqtest::normal_vector;
using cqtest::v2;
}  // namespace

TEST_CASE("weight type names parse, and an unknown name is refused with the accepted ones") {
  CHECK(la::parse_weight_type("bf16") == la::WeightType::bf16);
  CHECK(la::parse_weight_type("int8") == la::WeightType::int8);
  CHECK(la::parse_weight_type("f32") == la::WeightType::f32);
  CHECK_THROWS_WITH_AS(la::parse_weight_type("fp8"), doctest::Contains("expected f32, bf16 or int8"), cq::DomainError);
  CHECK(la::bytes_per_weight(la::WeightType::bf16, 896) == 2.0);
  CHECK(la::bytes_per_weight(la::WeightType::int8, 4) == 2.0);
}

TEST_CASE("int8 packing: one scale per row, max |W| maps to ±127, zero rows and extremes stay finite") {
  std::vector<float> w = {0.5f, -1.0f, 0.25f, 0.0f,                                            // row 0
                          0, 0, 0, 0,                                                          // row 1: zeros
                          3e38f, -3e38f, 1e-30f, 7.0f,                                         // row 2: huge
                          std::numeric_limits<float>::denorm_min(), 0, 0, -std::numeric_limits<float>::denorm_min()};
  const la::PackedMatrix p(la::WeightType::int8, c2(w, 4, 4));
  const auto r = p.ref();
  CHECK(r.cols_padded == 16);
  const auto q = [&](std::size_t i, std::size_t j) { return r.q[la::panel_index(i, j, r.cols_padded)]; };
  CHECK(q(0, 1) == -127);
  CHECK(q(0, 0) == 64);  // 0.5 / (1/127) = 63.5 → 64 (ties to even)
  CHECK(r.row_scale[0] == doctest::Approx(1.0 / 127));
  CHECK(r.row_scale[1] == 1.0f);
  for (std::size_t j = 0; j < 4; ++j) CHECK(q(1, j) == 0);
  CHECK(q(2, 0) == 127);
  CHECK(q(2, 1) == -127);
  CHECK(std::isfinite(r.row_scale[2]));
  CHECK(std::isfinite(r.row_scale[3]));
  for (std::size_t j = 4; j < 16; ++j) CHECK(q(3, j) == 0);  // the padding
  auto rounded = w;
  la::round_weights(la::WeightType::int8, v2(rounded, 4, 4));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      CHECK(rounded[i * 4 + j] == p.at(i, j));
      CHECK(std::abs(double(rounded[i * 4 + j]) - w[i * 4 + j]) <= 0.5 * double(r.row_scale[i]) * (1 + 1e-6));
    }
  CHECK(p.bytes() == 4 * 16 + 4 * 4);  // one panel of 4×16, and the row scales
}

TEST_CASE("bf16 packing rounds to nearest even, as the float copy is rounded") {
  const std::uint64_t seed = cqtest::test_seed(20261124, "bf16 packing");
  std::mt19937_64 rng(seed);
  auto w = normal_vector(7 * 33, rng);
  w[0] = std::numeric_limits<float>::infinity();
  w[1] = -0.0f;
  const la::PackedMatrix p(la::WeightType::bf16, c2(w, 7, 33));
  auto rounded = w;
  la::round_weights(la::WeightType::bf16, v2(rounded, 7, 33));
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t j = 0; j < 33; ++j) {
      CHECK(rounded[i * 33 + j] == p.at(i, j));
    }
  CHECK(std::signbit(rounded[1]));
  CHECK(rounded[0] == std::numeric_limits<float>::infinity());
  for (std::size_t i = 2; i < w.size(); ++i) CHECK(std::abs(double(rounded[i]) - w[i]) <= std::ldexp(std::abs(double(w[i])), -8));
}

TEST_CASE("a packed copy of 4 MiB and more lies on huge pages (2 MiB-aligned), packed with the rules of a small one") {
  const std::uint64_t seed = cqtest::test_seed(20261125, "large packed copy");
  std::mt19937_64 rng(seed);
  const std::size_t N = 1030, K = 2100;  // bf16: 4.1 MiB of panels, int8 2.1 MiB (on the heap)
  const auto w = normal_vector(N * K, rng, 0.05);
  const la::PackedMatrix bf16(la::WeightType::bf16, c2(w, N, K)), int8(la::WeightType::int8, c2(w, N, K));
  CHECK(reinterpret_cast<std::uintptr_t>(bf16.ref().bf16) % cq::huge_page_bytes == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(int8.ref().q) % 64 == 0);
  auto rounded_bf16 = w, rounded_int8 = w;
  la::round_weights(la::WeightType::bf16, v2(rounded_bf16, N, K));
  la::round_weights(la::WeightType::int8, v2(rounded_int8, N, K));
  bool same = true;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < K; ++j)
      same = same && bf16.at(i, j) == rounded_bf16[i * K + j] && int8.at(i, j) == rounded_int8[i * K + j];
  CHECK(same);
  const auto r = bf16.ref();  // the padding of the last panel group and of each row's last chunk is 0
  CHECK(r.bf16[la::panel_index(N + 1, 0, r.cols_padded)] == 0);
  CHECK(r.bf16[la::panel_index(0, K + 3, r.cols_padded)] == 0);
}

TEST_CASE("linear_forward reading a packed copy agrees with the float kernel on the rounded matrix (bf16: and on bf16-rounded X)") {
  const std::uint64_t seed = cqtest::test_seed(20261125, "packed few-rows kernel");
  std::mt19937_64 rng(seed);
  // K not a multiple of the vector width (a scalar tail); N not a multiple of 4 (single rows)
  for (const auto [M, K, N] : {std::array<std::size_t, 3>{1, 37, 13}, {3, 64, 130}, {8, 100, 67}}) {
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    const auto x = normal_vector(M * K, rng), b = normal_vector(N, rng);
    const auto w = normal_vector(N * K, rng, 0.05);
    for (auto type : {la::WeightType::bf16, la::WeightType::int8}) {
      CAPTURE(la::weight_type_name(type));
      const la::PackedMatrix p(type, c2(w, N, K));
      auto rounded = w;
      la::round_weights(type, v2(rounded, N, K));
      // the bf16 product rounds X to bf16 too (bf16_gemm.hpp); int8 reads X as it is
      auto x_read = x;
      if (type == la::WeightType::bf16)
        for (auto& v : x_read) v = cq::bf16_to_float(cq::float_to_bf16(v));
      std::vector<float> y_packed(M * N), y_float(M * N);
      la::linear_forward<float>(v2(y_packed, M, N), c2(x, M, K), c2(rounded, N, K), TensorView<const float, 1>(b.data(), {N}), p.ref());
      la::linear_forward<float>(v2(y_float, M, N), c2(x_read, M, K), c2(rounded, N, K), TensorView<const float, 1>(b.data(), {N}));
      for (std::size_t i = 0; i < M * N; ++i) CHECK(std::abs(y_packed[i] - y_float[i]) <= 1e-5 * (1 + std::abs(y_float[i])));
      // and the packed result against a double loop over the values read
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t n = 0; n < N; ++n) {
          double s = b[n];
          for (std::size_t k = 0; k < K; ++k) s += double(x_read[m * K + k]) * p.at(n, k);
          CHECK(std::abs(y_packed[m * N + n] - s) <= 1e-5 * (1 + std::abs(s)));
        }
    }
  }
}

TEST_CASE("fused Cauchy kernel reads the packed W_cls: loc and scale as from the rounded float W") {
  const std::uint64_t seed = cqtest::test_seed(20261126, "packed cauchy_linear");
  std::mt19937_64 rng(seed);
  const std::size_t R = 3, C = 45, N = 21;
  const auto loc = normal_vector(R * C, rng), w = normal_vector(N * C, rng), b = normal_vector(N, rng);
  auto scale = normal_vector(R * C, rng);
  for (auto& s : scale) s = std::abs(s) + 0.1f;
  for (auto type : {la::WeightType::bf16, la::WeightType::int8}) {
    CAPTURE(la::weight_type_name(type));
    const la::PackedMatrix p(type, c2(w, N, C));
    auto rounded = w;
    la::round_weights(type, v2(rounded, N, C));
    std::vector<float> lp(R * N), sp(R * N), lf(R * N), sf(R * N);
    const cq::CauchyView<const float, 2, cq::Kind::independent> a{c2(loc, R, C), c2(scale, R, C)};
    la::cauchy_linear<float>(cq::CauchyView<float, 2, cq::Kind::marginal>{v2(lp, R, N), v2(sp, R, N)}, c2(rounded, N, C), {},
                             TensorView<const float, 1>(b.data(), {N}), a, p.ref());
    la::cauchy_linear<float>(cq::CauchyView<float, 2, cq::Kind::marginal>{v2(lf, R, N), v2(sf, R, N)}, c2(rounded, N, C), {},
                             TensorView<const float, 1>(b.data(), {N}), a);
    for (std::size_t i = 0; i < R * N; ++i) {
      if (type == la::WeightType::bf16) {
        CHECK(lp[i] == lf[i]);
        CHECK(sp[i] == sf[i]);
      } else {
        CHECK(std::abs(lp[i] - lf[i]) <= 1e-5 * (1 + std::abs(lf[i])));
        CHECK(std::abs(sp[i] - sf[i]) <= 1e-5 * (1 + std::abs(sf[i])));
      }
    }
  }
}
