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
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;

namespace {
using cqtest::c2;
using cqtest::normal_vector;
using cqtest::v2;

/// x as the int8 kernels read it (int8_dot.hpp), written independently: per chunk of 16,
/// t = max |x| / 127 and x̂ = round(x / t), given back as x̂·t; the half-steps t/2 in `half_step`.
std::vector<double> dequantised(const float* x, std::size_t K, std::vector<double>* half_step = nullptr) {
  std::vector<double> out(K);
  if (half_step) half_step->assign(K, 0.0);
  for (std::size_t c0 = 0; c0 < K; c0 += 16) {
    const std::size_t c1 = std::min(K, c0 + 16);
    float m = 0;
    for (std::size_t j = c0; j < c1; ++j) m = std::max(m, std::abs(x[j]));
    const float t = m / 127.0f;
    for (std::size_t j = c0; j < c1; ++j) {
      out[j] = t > 0 ? double(std::nearbyint(x[j] / t)) * double(t) : 0.0;
      if (half_step) (*half_step)[j] = 0.5 * double(t);
    }
  }
  return out;
}

/// Checks an int8 product y (with bias b) of the quantised x against a double sum over the values
/// the kernel reads (within float rounding), and against the float product y_float of the
/// unquantised x within the quantisation bound Σ_j (t_j/2)·|w_j|.
void check_int8_row(float y, double bias, const std::vector<double>& xq, const std::vector<double>& half_step,
                    const la::PackedMatrix& p, std::size_t n, float y_float, bool absolute) {
  double s = bias, magnitude = std::abs(bias), bound = 0;
  for (std::size_t k = 0; k < xq.size(); ++k) {
    const double w = absolute ? std::abs(double(p.at(n, k))) : double(p.at(n, k));
    s += xq[k] * w;
    magnitude += std::abs(xq[k] * w);
    bound += half_step[k] * std::abs(w);
  }
  CHECK(std::abs(y - s) <= 1e-5 * (1 + magnitude));
  CHECK(std::abs(double(y) - y_float) <= bound + 1e-5 * (1 + magnitude));
}
}  // namespace

TEST_CASE("weight type names parse, and an unknown name is refused with the accepted ones") {
  CHECK(la::parse_weight_type("bf16") == la::Format::bf16);
  CHECK(la::parse_weight_type("int8") == la::Format::int8);
  CHECK(la::parse_weight_type("f32") == la::Format::f32);
  CHECK_THROWS_WITH_AS(la::parse_weight_type("fp8"), doctest::Contains("expected f32, bf16 or int8"), cq::DomainError);
  CHECK(la::bytes_per_weight(la::Format::bf16, 896) == 2.0);
  CHECK(la::bytes_per_weight(la::Format::int8, 4) == 2.0);
}

TEST_CASE("int8 packing: one scale per row, max |W| maps to ±127, zero rows and extremes stay finite") {
  std::vector<float> w = {0.5f, -1.0f, 0.25f, 0.0f,                                            // row 0
                          0, 0, 0, 0,                                                          // row 1: zeros
                          3e38f, -3e38f, 1e-30f, 7.0f,                                         // row 2: huge
                          std::numeric_limits<float>::denorm_min(), 0, 0, -std::numeric_limits<float>::denorm_min()};
  const la::PackedMatrix p(la::Format::int8, c2(w, 4, 4));
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
  la::round_weights(la::Format::int8, v2(rounded, 4, 4));
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
  const la::PackedMatrix p(la::Format::bf16, c2(w, 7, 33));
  auto rounded = w;
  la::round_weights(la::Format::bf16, v2(rounded, 7, 33));
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
  const la::PackedMatrix bf16(la::Format::bf16, c2(w, N, K)), int8(la::Format::int8, c2(w, N, K));
  CHECK(reinterpret_cast<std::uintptr_t>(bf16.ref().bf16) % cq::huge_page_bytes == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(int8.ref().q) % 64 == 0);
  auto rounded_bf16 = w, rounded_int8 = w;
  la::round_weights(la::Format::bf16, v2(rounded_bf16, N, K));
  la::round_weights(la::Format::int8, v2(rounded_int8, N, K));
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
    for (auto type : {la::Format::bf16, la::Format::int8}) {
      CAPTURE(la::format_name(type));
      const la::PackedMatrix p(type, c2(w, N, K));
      auto rounded = w;
      la::round_weights(type, v2(rounded, N, K));
      // the bf16 product rounds X to bf16 too (bf16_gemm.hpp); int8 quantises it (below)
      auto x_read = x;
      if (type == la::Format::bf16)
        for (auto& v : x_read) v = cq::bf16_to_float(cq::float_to_bf16(v));
      std::vector<float> y_packed(M * N), y_float(M * N);
      la::linear_forward<float>(v2(y_packed, M, N), c2(x, M, K), la::Weight<const float>(c2(rounded, N, K)).with_decode(p.ref()),
                                TensorView<const float, 1>(b.data(), {N}));
      la::linear_forward<float>(v2(y_float, M, N), c2(x_read, M, K), c2(rounded, N, K), TensorView<const float, 1>(b.data(), {N}));
      if (type == la::Format::int8) {  // X quantised per chunk of 16 (int8_dot.hpp)
        for (std::size_t m = 0; m < M; ++m) {
          std::vector<double> half_step;
          const auto xq = dequantised(x.data() + m * K, K, &half_step);
          for (std::size_t n = 0; n < N; ++n) check_int8_row(y_packed[m * N + n], b[n], xq, half_step, p, n, y_float[m * N + n], false);
        }
        continue;
      }
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
  for (auto type : {la::Format::bf16, la::Format::int8}) {
    CAPTURE(la::format_name(type));
    const la::PackedMatrix p(type, c2(w, N, C));
    auto rounded = w;
    la::round_weights(type, v2(rounded, N, C));
    std::vector<float> lp(R * N), sp(R * N), lf(R * N), sf(R * N);
    const auto a = cq::assume_cauchy_view<cq::Kind::independent>(c2(loc, R, C), c2(scale, R, C));
    la::cauchy_linear<float>(cq::CauchyOut<float, 2>{v2(lp, R, N), v2(sp, R, N)},
                             la::Weight<const float>(c2(rounded, N, C)).with_decode(p.ref()), TensorView<const float, 1>(b.data(), {N}), a);
    la::cauchy_linear<float>(cq::CauchyOut<float, 2>{v2(lf, R, N), v2(sf, R, N)}, c2(rounded, N, C),
                             TensorView<const float, 1>(b.data(), {N}), a);
    if (type == la::Format::bf16) {  // the same products summed in another order, and a double sum
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t n = 0; n < N; ++n) {
          const std::size_t i = r * N + n;
          double l = b[n], sc = 0, magnitude = std::abs(b[n]);
          for (std::size_t c = 0; c < C; ++c) {
            l += double(loc[r * C + c]) * p.at(n, c);
            sc += double(scale[r * C + c]) * std::abs(double(p.at(n, c)));
            magnitude += std::abs(double(loc[r * C + c]) * p.at(n, c));
          }
          CHECK(std::abs(lp[i] - lf[i]) <= 1e-5 * (1 + magnitude));
          CHECK(std::abs(sp[i] - sf[i]) <= 1e-5 * (1 + sc));
          CHECK(std::abs(lp[i] - l) <= 1e-5 * (1 + magnitude));
          CHECK(std::abs(sp[i] - sc) <= 1e-5 * (1 + sc));
        }
      continue;
    }
    for (std::size_t r = 0; r < R; ++r) {  // int8: loc_A and scale_A quantised per chunk of 16
      std::vector<double> loc_half, scale_half;
      const auto loc_q = dequantised(loc.data() + r * C, C, &loc_half), scale_q = dequantised(scale.data() + r * C, C, &scale_half);
      for (std::size_t n = 0; n < N; ++n) {
        check_int8_row(lp[r * N + n], b[n], loc_q, loc_half, p, n, lf[r * N + n], false);
        check_int8_row(sp[r * N + n], 0.0, scale_q, scale_half, p, n, sf[r * N + n], true);
      }
    }
  }
}

TEST_CASE("fused Cauchy kernel over rows of a packed bf16 W_cls from any row on: each row's bits as in the whole matrix") {
  // a block of classes starting on a panel group (the pointer walk over whole groups) and off one
  // (the indexed reads), with C a multiple of the 16-column chunk and not
  const std::uint64_t seed = cqtest::test_seed(20261127, "packed cauchy_linear rows");
  std::mt19937_64 rng(seed);
  const std::size_t R = 2, N = 27;
  for (std::size_t C : {std::size_t(64), std::size_t(77)}) {
    const auto loc = normal_vector(R * C, rng), w = normal_vector(N * C, rng);
    auto scale = normal_vector(R * C, rng);
    for (auto& s : scale) s = std::abs(s) + 0.1f;
    const la::PackedMatrix p(la::Format::bf16, c2(w, N, C));
    auto rounded = w;
    la::round_weights(la::Format::bf16, v2(rounded, N, C));
    const auto a = cq::assume_cauchy_view<cq::Kind::independent>(c2(loc, R, C), c2(scale, R, C));
    std::vector<float> l_all(R * N), s_all(R * N), lf(R * N), sf(R * N);
    la::cauchy_linear<float>(cq::CauchyOut<float, 2>{v2(l_all, R, N), v2(s_all, R, N)},
                             la::Weight<const float>(c2(rounded, N, C)).with_decode(p.ref()), {}, a);
    la::cauchy_linear<float>(cq::CauchyOut<float, 2>{v2(lf, R, N), v2(sf, R, N)}, c2(rounded, N, C), {}, a);
    for (std::size_t r = 0; r < R; ++r)  // the float kernel on the rounded matrix, summed in another order
      for (std::size_t i = 0; i < N; ++i) {
        double magnitude = 0;
        for (std::size_t c = 0; c < C; ++c) magnitude += std::abs(double(loc[r * C + c]) * rounded[i * C + c]);
        CHECK(std::abs(l_all[r * N + i] - lf[r * N + i]) <= 1e-5 * (1 + magnitude));
        CHECK(std::abs(s_all[r * N + i] - sf[r * N + i]) <= 1e-5 * (1 + sf[r * N + i]));
      }
    for (std::size_t k0 : {std::size_t(0), std::size_t(4), std::size_t(8), std::size_t(3), std::size_t(6)}) {
      CAPTURE(C);
      CAPTURE(k0);
      const std::size_t n = N - k0;
      std::vector<float> lp(R * n), sp(R * n);
      const TensorView<const float, 2> w_rows(rounded.data() + k0 * C, {n, C});
      la::cauchy_linear<float>(cq::CauchyOut<float, 2>{v2(lp, R, n), v2(sp, R, n)},
                               la::Weight<const float>(w_rows).with_decode(p.ref().rows_from(k0, n)), {}, a);
      std::size_t mismatches = 0;
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t i = 0; i < n; ++i)
          mismatches += (lp[r * n + i] != l_all[r * N + k0 + i]) + (sp[r * n + i] != s_all[r * N + k0 + i]);
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("int8 products: AVX512-VNNI and AVX2 give the portable loop's bits; rows independent of the batch; zero and non-finite "
          "inputs") {
  const std::uint64_t seed = cqtest::test_seed(20261127, "int8 kernels");
  std::mt19937_64 rng(seed);
  MESSAGE("int8 kernel on this CPU: ", std::string(la::int8_kernel_name()));
  const std::size_t M = 5, K = 100, N = 67;  // K: a chunk with a tail; N: a last group of 3 rows
  auto x = normal_vector(M * K, rng);
  x[7] = 40.0f;  // an outlier: its chunk's step grows, the others' do not
  const auto w = normal_vector(N * K, rng, 0.05), b = normal_vector(N, rng);
  const la::PackedMatrix p(la::Format::int8, c2(w, N, K));
  const TensorView<const float, 1> bias(b.data(), {N});
  const auto product = [&](la::Int8Kernel kernel, const float* xs, std::size_t rows, const la::PackedRef& ref,
                           bool with_bias = true) {
    la::set_int8_kernel(kernel);
    std::vector<float> y(rows * ref.rows);
    la::int8_linear_forward({y.data(), {rows, ref.rows}}, {xs, {rows, K}}, ref, with_bias ? bias : TensorView<const float, 1>{});
    la::set_int8_kernel(la::Int8Kernel::automatic);
    return y;
  };
  const auto hw = product(la::Int8Kernel::automatic, x.data(), M, p.ref());
  const auto portable = product(la::Int8Kernel::portable, x.data(), M, p.ref());
  CHECK(std::memcmp(hw.data(), portable.data(), hw.size() * sizeof(float)) == 0);
  la::set_int8_kernel(la::Int8Kernel::avx2);
  MESSAGE("int8 kernel chosen as avx2 on this CPU: ", std::string(la::int8_kernel_name()));
  CHECK(std::string(la::int8_kernel_name()) == (la::cpu_has_avx2_fma() ? "AVX2" : "portable"));
  const auto avx2 = product(la::Int8Kernel::avx2, x.data(), M, p.ref());
  CHECK(std::memcmp(avx2.data(), portable.data(), avx2.size() * sizeof(float)) == 0);
  for (std::size_t m = 0; m < M; ++m) {  // a row alone gives its bits in the batch
    const auto alone = product(la::Int8Kernel::automatic, x.data() + m * K, 1, p.ref());
    CHECK(std::memcmp(alone.data(), hw.data() + m * N, N * sizeof(float)) == 0);
  }
  // rows of a copy from an unaligned row on (the portable path) equal the whole product's
  const auto tail = product(la::Int8Kernel::automatic, x.data(), M, p.ref().rows_from(5, N - 5), false);
  const auto whole = product(la::Int8Kernel::automatic, x.data(), M, p.ref(), false);
  for (std::size_t m = 0; m < M; ++m)
    CHECK(std::memcmp(tail.data() + m * (N - 5), whole.data() + m * N + 5, (N - 5) * sizeof(float)) == 0);
  // the fused head: both kernels, the portable loop's bits, for a positive scale, one with exact
  // zeros (still ≥ 0: the AVX2 kernel skips its sign step) and one with negative values (it
  // does not)
  const auto check_head = [&](const std::vector<float>& scale) {
    std::vector<float> l2(M * N), s2(M * N);
    la::set_int8_kernel(la::Int8Kernel::portable);
    la::int8_cauchy_rows(p.ref(), x.data(), scale.data(), M, K, b.data(), l2.data(), s2.data());
    for (const auto kernel : {la::Int8Kernel::automatic, la::Int8Kernel::avx2}) {
      la::set_int8_kernel(kernel);
      CAPTURE(la::int8_kernel_name());
      std::vector<float> l1(M * N), s1(M * N);
      la::int8_cauchy_rows(p.ref(), x.data(), scale.data(), M, K, b.data(), l1.data(), s1.data());
      CHECK(std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0);
    }
  };
  auto scale = normal_vector(M * K, rng);
  for (auto& s : scale) s = std::abs(s) + 0.1f;
  check_head(scale);
  for (const float factor : {0.0f, -1.0f}) {
    CAPTURE(factor);
    auto odd_scale = scale;
    for (std::size_t i = 0; i < odd_scale.size(); i += 3) odd_scale[i] *= factor;
    check_head(odd_scale);
  }
  la::set_int8_kernel(la::Int8Kernel::automatic);
  // the largest products, ±127·±127, every sign pattern: no kernel saturates its 16-bit pair sums
  {
    const std::size_t Ks = 64, Ns = 8;
    std::vector<float> xs(Ks), ws(Ns * Ks);
    for (std::size_t k = 0; k < Ks; ++k) xs[k] = (k / 3) % 2 ? -1.0f : 1.0f;
    for (std::size_t n = 0; n < Ns; ++n)
      for (std::size_t k = 0; k < Ks; ++k) ws[n * Ks + k] = n % 2 ? -xs[k] : (n % 4 == 2 ? 1.0f : xs[k]);
    const la::PackedMatrix ps(la::Format::int8, c2(ws, Ns, Ks));
    std::vector<float> y_portable(Ns);
    for (const auto kernel : {la::Int8Kernel::portable, la::Int8Kernel::avx2, la::Int8Kernel::automatic}) {
      la::set_int8_kernel(kernel);
      CAPTURE(la::int8_kernel_name());
      std::vector<float> ys(Ns);
      la::int8_linear_forward({ys.data(), {1, Ns}}, {xs.data(), {1, Ks}}, ps.ref());
      double sum_x = 0;
      for (const float v : xs) sum_x += v;
      for (std::size_t n = 0; n < Ns; ++n) {
        const double expected = n % 2 ? -double(Ks) : (n % 4 == 2 ? sum_x : double(Ks));
        CHECK(std::abs(ys[n] - expected) <= 1e-4 * Ks);
      }
      if (kernel == la::Int8Kernel::portable) y_portable = ys;
      CHECK(std::memcmp(ys.data(), y_portable.data(), Ns * sizeof(float)) == 0);
    }
    la::set_int8_kernel(la::Int8Kernel::automatic);
  }
  // a zero input gives the bias; ∞ or NaN in a chunk gives NaN
  std::vector<float> special(3 * K, 0.0f);
  special[K + 20] = std::numeric_limits<float>::infinity();
  special[2 * K + 99] = std::numeric_limits<float>::quiet_NaN();
  const auto y = product(la::Int8Kernel::automatic, special.data(), 3, p.ref());
  for (std::size_t n = 0; n < N; ++n) {
    CHECK(y[n] == b[n]);
    CHECK(std::isnan(y[N + n]));
    CHECK(std::isnan(y[2 * N + n]));
  }
}

TEST_CASE("int8 input quantisation: AVX-512, AVX2 and the portable loop give the same bytes; ties to even, subnormals, tails") {
  const std::uint64_t seed = cqtest::test_seed(20261128, "int8 quantisation");
  std::mt19937_64 rng(seed);
  const std::size_t K = 16 * 6 + 5;  // six whole chunks and a tail of 5
  auto x = normal_vector(3 * K, rng);
  // row 0: chunk 0 has max 127, so t = 1 and x̂ = round(x) with ties to even
  const float ties[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, -127.0f, 126.5f};
  std::copy(std::begin(ties), std::end(ties), x.begin());
  for (std::size_t k = 16; k < 32; ++k) x[k] = 1e-40f * float(k - 15);  // chunk 1: subnormals only
  for (std::size_t k = 32; k < 48; ++k) x[k] = 0.0f;                    // chunk 2: zeros
  x[K + 50] = -std::numeric_limits<float>::infinity();                   // row 1, chunk 3
  x[2 * K + K - 1] = std::numeric_limits<float>::quiet_NaN();           // row 2, the tail
  la::detail_int8::Quantised portable;
  portable.assign(x.data(), K, 3, K, la::Int8Isa::portable);
  const std::size_t chunks = (K + 15) / 16;
  for (std::size_t i = 0; i < 3 * chunks * 16; ++i)  // x̂ = ±|x̂| with its sign bit (the AVX2 kernel's bytes)
    CHECK(int(portable.value[i]) == ((portable.sign[i / 16] >> (i % 16)) & 1u ? -1 : 1) * int(portable.mag[i]));
  // every instruction set this CPU runs, against the portable loop (on a CPU with neither, the
  // portable loop against itself)
  std::vector<la::Int8Isa> isas;
  if (la::detail_int8::cpu_has_avx512_vnni()) isas.push_back(la::Int8Isa::avx512_vnni);
  if (la::cpu_has_avx2_fma()) isas.push_back(la::Int8Isa::avx2);
  if (isas.empty()) isas.push_back(la::Int8Isa::portable);
  for (const la::Int8Isa isa : isas) {
    CAPTURE(int(isa));
    la::detail_int8::Quantised hw;
    hw.assign(x.data(), K, 3, K, isa);
    CHECK(hw.chunks == chunks);
    CHECK(std::memcmp(hw.mag.data(), portable.mag.data(), 3 * chunks * 16) == 0);
    CHECK(std::memcmp(hw.sign.data(), portable.sign.data(), 3 * chunks * sizeof(std::uint16_t)) == 0);
    if (isa != la::Int8Isa::avx512_vnni) CHECK(std::memcmp(hw.value.data(), portable.value.data(), 3 * chunks * 16) == 0);
    for (std::size_t i = 0; i < 3 * chunks; ++i) {
      CAPTURE(i);
      CHECK((hw.scale[i] == portable.scale[i] || (std::isnan(hw.scale[i]) && std::isnan(portable.scale[i]))));
    }
  }
  la::detail_int8::Quantised hw;
  hw.assign(x.data(), K, 3, K, la::int8_kernel_isa());
  const std::uint8_t expect[] = {127, 2, 4, 2, 0, 0, 127, 126};  // |round-half-even(x)|
  for (std::size_t k = 0; k < 8; ++k) CHECK(int(hw.mag[k]) == int(expect[k]));
  CHECK((hw.sign[0] & 0xFFu) == ((1u << 3) | (1u << 6)));  // −2.5 → −2 and −127; −0.5 → −0 carries no sign
  CHECK(hw.scale[0] == 1.0f);
  CHECK(hw.scale[2] == 0.0f);                    // zeros: t = 0, x̂ = 0
  CHECK(std::isnan(hw.scale[chunks + 3]));       // −∞ in the chunk
  CHECK(std::isnan(hw.scale[2 * chunks + chunks - 1]));
  for (std::size_t k = K % 16; k < 16; ++k) CHECK(int(hw.mag[(chunks - 1) * 16 + k]) == 0);  // row 0's tail padding
}
