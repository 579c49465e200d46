// The bf16 product of a linear layer, Y = bf16(X)·Wᵀ (+ b) over a bf16 panel copy of W
// (linalg/bf16_gemm.hpp): the AVX512-BF16 and AVX2 kernels give the portable loop's bits; a row's result
// does not depend on how many rows X has, where the row sits or the thread count; the sums agree
// with a double loop over the bf16 values; X's rounding is float_to_bf16's (ties, overflow, NaN);
// infinities and NaN propagate; wrong input is refused with a sentence.
#include "../support/float_matrices.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/linalg/bf16_gemm.hpp>
#include <causalqwen/linalg/cauchy_linear.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;
using cqtest::c2, cqtest::normal_vector, cqtest::v2;

namespace {
float bf16_round(float v) { return cq::bf16_to_float(cq::float_to_bf16(v)); }

/// The instruction sets this CPU runs, the portable loop first.
std::vector<la::Bf16Isa> cpu_isas() {
  std::vector<la::Bf16Isa> isas{la::Bf16Isa::portable};
  if (la::cpu_has_avx2_fma()) isas.push_back(la::Bf16Isa::avx2);
  if (la::detail_bf16::cpu_has_avx512_bf16()) isas.push_back(la::Bf16Isa::avx512_bf16);
  return isas;
}
const char* isa_name(la::Bf16Isa isa) {
  return isa == la::Bf16Isa::avx512_bf16 ? "AVX512-BF16" : isa == la::Bf16Isa::avx2 ? "AVX2" : "portable";
}

/// Y on the instruction set `isa`.
std::vector<float> product(la::Bf16Isa isa, const std::vector<float>& x, std::size_t M, std::size_t K, const la::PackedRef& w,
                           const std::vector<float>& b) {
  std::vector<float> y(M * w.rows);
  la::detail_bf16::forward(isa, v2(y, M, w.rows), c2(x, M, K), w,
                           b.empty() ? TensorView<const float, 1>{} : TensorView<const float, 1>(b.data(), {w.rows}));
  return y;
}

/// Y = s ⊙ (bf16(X)·Qᵀ) (+ b) on the instruction set `isa`, W an int8 copy.
std::vector<float> int8_product(la::Bf16Isa isa, const std::vector<float>& x, std::size_t M, std::size_t K,
                                const la::PackedRef& w, const std::vector<float>& b) {
  std::vector<float> y(M * w.rows);
  la::detail_bf16::forward_int8(isa, v2(y, M, w.rows), c2(x, M, K), w,
                                b.empty() ? TensorView<const float, 1>{} : TensorView<const float, 1>(b.data(), {w.rows}));
  return y;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// On every instruction set this CPU runs: each row of run(isa, X, M) [M, N] (X [M, K]) has the
/// bits of the same row run alone, and the whole product on one thread the bits of it on all.
template <class Run>
void check_rows_independent(const std::vector<float>& x, std::size_t M, std::size_t K, std::size_t N, const Run& run) {
  for (const auto isa : cpu_isas()) {
    CAPTURE(isa_name(isa));
    const auto all = run(isa, x, M);
    for (std::size_t m = 0; m < M; ++m) {
      const std::vector<float> row(x.begin() + std::ptrdiff_t(m * K), x.begin() + std::ptrdiff_t((m + 1) * K));
      const auto alone = run(isa, row, 1);
      for (std::size_t n = 0; n < N; ++n) CHECK(same_bits(alone[n], all[m * N + n]));
    }
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one_thread = run(isa, x, M);
    omp_set_num_threads(threads);
    for (std::size_t i = 0; i < M * N; ++i) CHECK(same_bits(one_thread[i], all[i]));
  }
}

// M: one row, a tile and a tail, and from 24 rows on (AVX2: the lane products) one block of 48
// rows and more; N: a single panel group, tails of 4 and 8, and (lane products) past one task of
// 64 rows; K: below one chunk, tails of 16, the Qwen2.5-0.5B width, and past the AVX2 kernel's
// block of 1,024 (K in two blocks)
constexpr std::array<std::array<std::size_t, 3>, 9> shapes{
    {{1, 7, 5}, {2, 16, 9}, {7, 33, 13}, {13, 100, 64}, {6, 48, 36}, {40, 896, 130}, {5, 1100, 9}, {53, 70, 67}, {24, 1100, 20}}};
}  // namespace

TEST_CASE("bf16 product: AVX512-BF16 and AVX2 give the portable loop's bits, all agree with a double loop") {
  const std::uint64_t seed = cqtest::test_seed(20261130, "bf16 product kernels");
  std::mt19937_64 rng(seed);
  for (const auto isa : cpu_isas())
    if (isa != la::Bf16Isa::portable) MESSAGE("this CPU runs " << std::string(isa_name(isa)) << ": its kernel is compared with the portable loop");
  for (const auto [M, K, N] : shapes) {
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.05), b = normal_vector(N, rng);
    const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
    const auto portable = product(la::Bf16Isa::portable, x, M, K, p.ref(), b);
    for (const auto isa : cpu_isas()) {
      CAPTURE(isa_name(isa));
      const auto fast = product(isa, x, M, K, p.ref(), b);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < M * N; ++i) differ += !same_bits(fast[i], portable[i]);
      CHECK(differ == 0);
    }
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n) {
        double s = b[n], magnitude = std::abs(b[n]);
        for (std::size_t k = 0; k < K; ++k) {
          const double term = double(bf16_round(x[m * K + k])) * p.at(n, k);
          s += term;
          magnitude += std::abs(term);
        }
        // float summation of K + 1 exact terms: |error| ≤ (K + 1)·2⁻²⁴·Σ|terms|
        CHECK(std::abs(portable[m * N + n] - s) <= double(K + 1) * 0x1p-24 * magnitude);
      }
  }
}

TEST_CASE("bf16 product: a row's bits do not depend on the rows beside it, its place in X or the thread count") {
  const std::uint64_t seed = cqtest::test_seed(20261131, "bf16 product row independence");
  std::mt19937_64 rng(seed);
  const std::size_t M = 19, K = 400, N = 44;  // large enough to run on the threads
  const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.05);
  const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
  check_rows_independent(x, M, K, N, [&](la::Bf16Isa isa, const std::vector<float>& rows, std::size_t count) {
    return product(isa, rows, count, K, p.ref(), {});
  });
}

TEST_CASE("bf16 product: rows of a copy from a panel group onwards, as linear_forward is given them") {
  const std::uint64_t seed = cqtest::test_seed(20261132, "bf16 product row ranges");
  std::mt19937_64 rng(seed);
  const std::size_t M = 9, K = 70, N = 30;
  const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.05);
  const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
  const auto whole = product(la::bf16_kernel_isa(), x, M, K, p.ref(), {});
  const auto part = p.ref().rows_from(8, 13);  // rows [8, 21): groups 2..5, the last one partly
  std::vector<float> y(M * 13);
  la::linear_forward<float>(v2(y, M, 13), c2(x, M, K),
                            la::Weight<const float>(TensorView<const float, 2>(w.data() + 8 * K, {13, K})).with_decode(part));
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < 13; ++n) CHECK(same_bits(y[m * 13 + n], whole[m * N + 8 + n]));
  std::vector<float> y2(M * 13);
  CHECK_THROWS_WITH_AS(la::bf16_linear_forward(v2(y2, M, 13), c2(x, M, K), p.ref().rows_from(6, 13)),
                       doctest::Contains("starts at row 6 of its panels, not at a multiple of 4"), cq::DomainError);
  std::vector<float> x_short(M * 69);
  CHECK_THROWS_WITH_AS(la::bf16_linear_forward(v2(y2, M, 13), c2(x_short, M, 69), part),
                       doctest::Contains("does not match X"), cq::DomainError);
  const la::PackedMatrix q(la::Format::int8, c2(w, N, K));
  std::vector<float> y3(M * N);
  CHECK_THROWS_WITH_AS(la::bf16_linear_forward(v2(y3, M, N), c2(x, M, K), q.ref()), doctest::Contains("W is int8, not a bf16 copy"),
                       cq::DomainError);
}

TEST_CASE("int8 weights on the bf16 product (many rows): s·(bf16(X)·q) + b, every kernel with the portable loop's bits, "
          "within float rounding of a double loop") {
  const std::uint64_t seed = cqtest::test_seed(20261128, "int8 rows on the bf16 product");
  std::mt19937_64 rng(seed);
  for (const auto [M, K, N] : shapes) {
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    auto w = normal_vector(N * K, rng, 0.05);
    for (std::size_t n = 0; n < N; ++n)  // rows of very different scales
      for (std::size_t k = 0; k < K; ++k) w[n * K + k] *= std::ldexp(1.0f, int(n % 7) * 6 - 18);
    const auto x = normal_vector(M * K, rng), b = normal_vector(N, rng);
    const la::PackedMatrix p(la::Format::int8, c2(w, N, K));
    const la::PackedRef ref = p.ref();
    const auto portable = int8_product(la::Bf16Isa::portable, x, M, K, ref, b);
    for (const auto isa : cpu_isas()) {
      CAPTURE(isa_name(isa));
      const auto fast = int8_product(isa, x, M, K, ref, b);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < M * N; ++i) differ += !same_bits(fast[i], portable[i]);
      CHECK(differ == 0);
    }
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n) {
        double sum = 0, magnitude = 0;
        for (std::size_t k = 0; k < K; ++k) {
          const double term = double(bf16_round(x[m * K + k])) * ref.q[la::panel_index(n, k, ref.cols_padded)];
          sum += term;
          magnitude += std::abs(term);
        }
        const double s = ref.row_scale[n], expected = s * sum + b[n];
        // K exact terms summed in float, then one product and one sum, each rounded
        CHECK(std::abs(portable[m * N + n] - expected) <= double(K + 3) * 0x1p-24 * (s * magnitude + std::abs(b[n])));
      }
  }
}

TEST_CASE("int8 weights on the bf16 product: a row's bits do not depend on the rows beside it or the thread count; "
          "linear_forward sends more than 8 rows there on AVX512-BF16, else to the float GEMM over q·s") {
  const std::uint64_t seed = cqtest::test_seed(20261129, "int8 rows routing");
  std::mt19937_64 rng(seed);
  const std::size_t M = 19, K = 400, N = 44;
  const auto x = normal_vector(M * K, rng);
  auto w = normal_vector(N * K, rng, 0.05);
  const la::PackedMatrix p(la::Format::int8, c2(w, N, K));
  check_rows_independent(x, M, K, N, [&](la::Bf16Isa isa, const std::vector<float>& rows, std::size_t count) {
    return int8_product(isa, rows, count, K, p.ref(), {});
  });
  // linear_forward over the float W holding q·s, as a model with int8 weights keeps it; our own
  // kernels (oneDNN's int8 prefill: test_onednn_bf16)
  la::set_bf16_kernel(la::Bf16Kernel::own);
  la::round_weights(la::Format::int8, v2(w, N, K));
  const auto through_linear = [&](std::size_t rows) {
    std::vector<float> y(rows * N);
    la::linear_forward<float>(v2(y, rows, N), c2(x, rows, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref()));
    return y;
  };
  std::vector<float> gemm(M * N);
  la::matmul<float>(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, w.data(), K, gemm.data(), N, false);
  const auto bf16_rows = int8_product(la::bf16_kernel_isa(), x, M, K, p.ref(), {});
  const auto routed = through_linear(M);
  const bool on_bf16 = la::int8_rows_on_bf16();
  CHECK(on_bf16 == (la::bf16_kernel_isa() == la::Bf16Isa::avx512_bf16));
  MESSAGE("int8 products of more than 8 rows run on " << std::string(on_bf16 ? "the bf16 product" : "the float GEMM") << " on this CPU");
  std::size_t as_bf16 = 0, as_gemm = 0;
  for (std::size_t i = 0; i < M * N; ++i) {
    as_bf16 += same_bits(routed[i], bf16_rows[i]);
    as_gemm += same_bits(routed[i], gemm[i]);
  }
  CHECK(as_bf16 == (on_bf16 ? M * N : as_bf16));
  CHECK(as_gemm == (on_bf16 ? as_gemm : M * N));
  if (on_bf16) CHECK(as_gemm < M * N);  // the two paths do differ: X is rounded to bf16 on one
  la::set_int8_kernel(la::Int8Kernel::avx2);  // not automatic: the float GEMM
  CHECK_FALSE(la::int8_rows_on_bf16());
  const auto chosen_gemm = through_linear(M);
  la::set_int8_kernel(la::Int8Kernel::automatic);
  for (std::size_t i = 0; i < M * N; ++i) CHECK(same_bits(chosen_gemm[i], gemm[i]));
  // rows of the copy from a panel group on, as a model's fused maps hand them over
  std::vector<float> part(M * 13);
  la::int8_rows_linear_forward(v2(part, M, 13), c2(x, M, K), p.ref().rows_from(8, 13));
  const auto whole = int8_product(la::bf16_kernel_isa(), x, M, K, p.ref(), {});
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < 13; ++n) CHECK(same_bits(part[m * 13 + n], whole[m * N + 8 + n]));
  CHECK_THROWS_WITH_AS(la::int8_rows_linear_forward(v2(part, M, 13), c2(x, M, K), p.ref().rows_from(6, 13)),
                       doctest::Contains("starts at row 6 of its panels, not at a multiple of 4"), cq::DomainError);
  const la::PackedMatrix b16(la::Format::bf16, c2(w, N, K));
  std::vector<float> y(M * N);
  CHECK_THROWS_WITH_AS(la::int8_rows_linear_forward(v2(y, M, N), c2(x, M, K), b16.ref()),
                       doctest::Contains("W is bf16, not an int8 copy"), cq::DomainError);
  la::set_bf16_kernel(la::Bf16Kernel::automatic);
}

TEST_CASE("bf16 product: X rounds as float_to_bf16 does (ties to even, overflow to infinity, NaN); infinities and NaN propagate") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tie_down = std::bit_cast<float>(0x3F808000u), tie_up = std::bit_cast<float>(0x3F818000u);  // ties: to even
  const float max = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> special = {tie_down, tie_up, max, -max, inf, -inf, nan, tiny, -0.0f, 1e-40f, 3.0f, -2.5f, 0.1f, 7.0f, 1e30f, -1e-30f, 0.5f};
  const std::size_t K = special.size();
  std::vector<std::uint16_t> portable(32), fast(32);
  la::detail_bf16::pack_portable(special.data(), K, false, 1, K, 32, la::detail_bf16::PackLayout::rows, portable.data());
  for (std::size_t k = 0; k < K; ++k) CHECK(portable[k] == cq::float_to_bf16(special[k]));
  for (std::size_t k = K; k < 32; ++k) CHECK(portable[k] == 0);  // padding
#ifdef CAUSALQWEN_BF16_KERNEL
  if (la::detail_bf16::cpu_has_avx512_bf16()) {
    la::detail_bf16::pack_avx512(special.data(), K, false, 1, K, 32, la::detail_bf16::PackLayout::rows, fast.data());
    for (std::size_t k = 0; k < 32; ++k) CHECK(fast[k] == portable[k]);
  }
  if (la::cpu_has_avx2_fma()) {  // AVX2: rows and panels (a padded group of 4), the tail masked
    std::vector<float> rows3(3 * K);
    for (std::size_t r = 0; r < 3; ++r) std::rotate_copy(special.begin(), special.begin() + long(r), special.end(), rows3.begin() + long(r * K));
    for (const auto layout : {la::detail_bf16::PackLayout::rows, la::detail_bf16::PackLayout::panels}) {
      std::vector<std::uint16_t> loop(4 * 32, 9), avx2(4 * 32, 9);
      la::detail_bf16::pack_portable(rows3.data(), K, false, 3, K, 32, layout, loop.data());
      la::detail_bf16::pack_avx2(rows3.data(), K, false, 3, K, 32, layout, avx2.data());
      const std::size_t n = layout == la::detail_bf16::PackLayout::rows ? 3 * 32 : 4 * 32;
      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        CHECK(avx2[i] == loop[i]);
      }
    }
  }
#endif
  // one weight row of ones: y = Σ bf16(x); a row with an infinity gives ±∞, one with NaN gives NaN
  const std::vector<float> ones(4 * 3, 1.0f);
  const la::PackedMatrix p(la::Format::bf16, c2(ones, 4, 3));
  for (const auto isa : cpu_isas()) {
    CAPTURE(isa_name(isa));
    const std::vector<float> x = {1.0f, inf, 2.0f, 1.0f, nan, 2.0f, max, max, 0.0f, 0.25f, 0.5f, -1.0f};
    const auto y = product(isa, x, 4, 3, p.ref(), {});
    CHECK(y[0] == inf);
    CHECK(std::isnan(y[4]));
    CHECK(y[8] == inf);  // bf16(max) rounds up to +∞
    CHECK(y[12] == -0.25f);
  }
}

TEST_CASE("bf16 pairing of W's rows (dY·W in training): AVX-512 and AVX2 give the portable bits, subnormals, NaNs and ties "
          "included") {
  // vcvtne2ps2bf16 reads a subnormal as 0: a vector holding one takes the integer rounding
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float snan = std::bit_cast<float>(0x7FA00001u), tie = std::bit_cast<float>(0x3F808000u);
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::size_t K = 5, cols = 40, ld = 41, ld_pairs = 48;  // an odd K: the last pair's high half is 0
  std::vector<float> src(K * ld);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::sin(float(i)) * 3.0f;
  src[0] = tiny;         // row 0, first vector: the integer path for the row pair (0, 1)
  src[ld + 17] = 1e-40f; // row 1, second vector: likewise for its pair
  src[2 * ld + 3] = snan;
  src[3 * ld + 20] = nan;
  src[2 * ld + 33] = -inf;
  src[4 * ld + 5] = tie;
  const std::size_t P = (K + 1) / 2;
  std::vector<std::uint32_t> portable(P * ld_pairs, 7u), fast(P * ld_pairs, 7u);
  la::detail_bf16::pair_rows_portable(src.data(), ld, K, cols, ld_pairs, portable.data());
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t c = 0; c < cols; ++c) {
      const std::uint32_t lo = cq::float_to_bf16(src[2 * p * ld + c]);
      const std::uint32_t hi = 2 * p + 1 < K ? cq::float_to_bf16(src[(2 * p + 1) * ld + c]) : 0u;
      CHECK(portable[p * ld_pairs + c] == (lo | (hi << 16)));
    }
#ifdef CAUSALQWEN_BF16_KERNEL
  if (la::detail_bf16::cpu_has_avx512_bf16()) {
    la::detail_bf16::pair_rows_on(la::Bf16Isa::avx512_bf16, src.data(), ld, K, cols, ld_pairs, fast.data());
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t c = 0; c < cols; ++c) {
        CAPTURE(p);
        CAPTURE(c);
        CHECK(fast[p * ld_pairs + c] == portable[p * ld_pairs + c]);
      }
  }
  if (la::cpu_has_avx2_fma()) {  // split pairs: row 2p the high halves widened, row 2p+1 the low ones
    std::vector<float> split(2 * P * ld_pairs, 7.0f);
    la::detail_bf16::pair_rows_on(la::Bf16Isa::avx2, src.data(), ld, K, cols, ld_pairs, split.data());
    std::size_t differ = 0;
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t c = 0; c < ld_pairs; ++c) {
        const std::uint32_t pair = portable[p * ld_pairs + c];
        differ += !same_bits(split[2 * p * ld_pairs + c], cq::bf16_to_float(std::uint16_t(pair >> 16)));
        differ += !same_bits(split[(2 * p + 1) * ld_pairs + c], cq::bf16_to_float(std::uint16_t(pair & 0xFFFFu)));
      }
    CHECK(differ == 0);
    // A's rows (dY of dX = dY·W): pairs of columns, swapped in the split
    const std::size_t ld_words = 24;  // 48 columns: 8 past K
    std::vector<std::uint32_t> words(K * ld_words);
    std::vector<float> columns(K * 2 * ld_words, 7.0f);
    la::detail_bf16::pair_columns_portable(src.data(), ld, K, cols, ld_words, words.data());
    la::detail_bf16::split_columns_avx2(src.data(), ld, K, cols, 2 * ld_words, columns.data());
    differ = 0;
    for (std::size_t m = 0; m < K; ++m)
      for (std::size_t q = 0; q < ld_words; ++q) {
        const std::uint32_t pair = words[m * ld_words + q];
        differ += !same_bits(columns[m * 2 * ld_words + 2 * q], cq::bf16_to_float(std::uint16_t(pair >> 16)));
        differ += !same_bits(columns[m * 2 * ld_words + 2 * q + 1], cq::bf16_to_float(std::uint16_t(pair & 0xFFFFu)));
      }
    CHECK(differ == 0);
    // from a bf16 copy in panels, as |values| too: the pairs the portable loop makes from it
    std::vector<float> dense(K * cols);
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t c = 0; c < cols; ++c) dense[k * cols + c] = src[k * ld + c];
    const la::PackedMatrix copy(la::Format::bf16, c2(dense, K, cols));
    for (const bool abs : {false, true}) {
      CAPTURE(abs);
      const std::size_t width = 24, j0 = 16;  // a task's columns [16, 40)
      std::vector<std::uint32_t> pairs(P * 32);
      std::vector<float> rows(2 * P * 32, 7.0f);
      differ = 0;
      for (std::size_t p = 0; p < P; ++p) {
        la::detail_bf16::pair_panel_row_portable(copy.ref().bf16, copy.ref().cols_padded, K, 0, j0, width, 32, p, pairs.data(), abs);
        la::detail_bf16::split_panel_row_avx2(copy.ref().bf16, copy.ref().cols_padded, K, 0, j0, width, 32, p, rows.data(), abs);
        for (std::size_t c = 0; c < 32; ++c) {
          differ += !same_bits(rows[2 * p * 32 + c], cq::bf16_to_float(std::uint16_t(pairs[p * 32 + c] >> 16)));
          differ += !same_bits(rows[(2 * p + 1) * 32 + c], cq::bf16_to_float(std::uint16_t(pairs[p * 32 + c] & 0xFFFFu)));
        }
      }
      CHECK(differ == 0);
    }
  }
#endif
}

TEST_CASE("bf16 product: set_bf16_kernel chooses AVX2 or the portable loop; the name says which runs") {
  la::set_bf16_kernel(la::Bf16Kernel::portable);
  CHECK(!la::bf16_kernel_is_hardware());
  CHECK(std::string(la::bf16_kernel_name()) == "portable");
  la::set_bf16_kernel(la::Bf16Kernel::avx2);
  CHECK(la::bf16_kernel_isa() == (la::cpu_has_avx2_fma() ? la::Bf16Isa::avx2 : la::Bf16Isa::portable));
  CHECK(std::string(la::bf16_kernel_name()) == (la::cpu_has_avx2_fma() ? "AVX2" : "portable"));
  la::set_bf16_kernel(la::Bf16Kernel::own);
  CHECK(!la::bf16_products_on_onednn());
  CHECK(la::bf16_kernel_isa() == cpu_isas().back());
  CHECK(std::string(la::bf16_kernel_name()) == isa_name(cpu_isas().back()));
  la::set_bf16_kernel(la::Bf16Kernel::automatic);
  CHECK(la::bf16_kernel_isa() == cpu_isas().back());
  CHECK(std::string(la::bf16_own_kernel_name()) == isa_name(cpu_isas().back()));
  if (!la::bf16_products_on_onednn()) CHECK(std::string(la::bf16_kernel_name()) == isa_name(cpu_isas().back()));
  else CHECK(la::bf16_kernel_name().find("(oneDNN)") != std::string::npos);
}

namespace {
/// M×N row-major matrix `src` [rows, cols] stored with leading dimension ld (≥ cols) as stored,
/// or its transpose [cols, rows] with leading dimension ld (≥ rows): what bf16_matmul reads.
std::vector<float> stored(const std::vector<float>& src, std::size_t rows, std::size_t cols, bool transposed, std::size_t ld) {
  std::vector<float> out((transposed ? cols : rows) * ld, std::numeric_limits<float>::quiet_NaN());  // padding never read
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) (transposed ? out[c * ld + r] : out[r * ld + c]) = src[r * cols + c];
  return out;
}
}  // namespace

TEST_CASE("bf16_matmul (mixed-precision training): every operand layout gives the bits of the bf16 linear product "
          "(Aᵀ·B and A·B: of the portable outer product); AVX-512 packing and the AVX512-BF16 and AVX2 kernels give the portable "
          "bits; accumulation adds") {
  const std::uint64_t seed = cqtest::test_seed(20261125, "bf16_matmul layouts");
  std::mt19937_64 rng(seed);
  for (const auto [M, K, N] : shapes) {
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.05), c0 = normal_vector(M * N, rng);
    // the reference: Y = bf16(X)·Wᵀ over a bf16 panel copy of W (the tests above)
    const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
    const auto reference = product(la::Bf16Isa::portable, x, M, K, p.ref(), {});
    for (const auto isa : cpu_isas()) {
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          CAPTURE(isa_name(isa));
          CAPTURE(ta);
          CAPTURE(tb);
          // op(A) = X [M,K]; op(B) = Wᵀ [K,N]: B is stored as W [N,K] when op_b is transposed
          const std::size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
          const auto a = stored(x, M, K, ta, lda);
          const auto b = tb ? stored(w, N, K, false, ldb) : stored(w, N, K, true, ldb);
          std::vector<float> c(M * ldc, 7.0f);
          la::detail_bf16::matmul(isa, ta, tb, M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, false);
          // Aᵀ·B and A·B (B stored with K as rows) run on the outer-product kernel, whose order of
          // the sums differs: their reference is the portable Aᵀ·B outer product (the two paths,
          // A·B's in blocks of pairs, sum in the same order), and it stays within the float
          // summation bound of the other (the last test bounds both against double sums)
          std::vector<float> expected = reference;
          if (!tb) {
            std::vector<float> outer(M * ldc, 7.0f);
            const auto a_t = stored(x, M, K, true, M + 3);
            la::detail_bf16::matmul(la::Bf16Isa::portable, true, false, M, N, K, a_t.data(), M + 3, b.data(), ldb, outer.data(), ldc, false);
            for (std::size_t m = 0; m < M; ++m)
              for (std::size_t n = 0; n < N; ++n) {
                expected[m * N + n] = outer[m * ldc + n];
                double magnitude = 0;
                for (std::size_t k = 0; k < K; ++k) magnitude += std::abs(double(bf16_round(x[m * K + k])) * p.at(n, k));
                CHECK(std::abs(double(outer[m * ldc + n]) - reference[m * N + n]) <= 2.0 * double(K + 1) * 0x1p-24 * magnitude);
              }
          }
          std::size_t differ = 0;
          for (std::size_t m = 0; m < M; ++m)
            for (std::size_t n = 0; n < N; ++n) differ += !same_bits(c[m * ldc + n], expected[m * N + n]);
          CHECK(differ == 0);
          for (std::size_t m = 0; m < M; ++m)  // the columns past N are not touched
            for (std::size_t n = N; n < ldc; ++n) CHECK(c[m * ldc + n] == 7.0f);
          for (std::size_t m = 0; m < M; ++m)
            for (std::size_t n = 0; n < N; ++n) c[m * ldc + n] = c0[m * N + n];
          la::detail_bf16::matmul(isa, ta, tb, M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, true);
          differ = 0;
          for (std::size_t m = 0; m < M; ++m)
            for (std::size_t n = 0; n < N; ++n) differ += !same_bits(c[m * ldc + n], c0[m * N + n] + expected[m * N + n]);
          CHECK(differ == 0);
        }
    }
  }
}

namespace {
/// out [rows, cols] against Σ_t u·v (+ bias_j) over t < terms, {u, v} = factors(i, j, t): within
/// the float summation bound of a double sum over the operands the precision reads (bf16-rounded
/// for bf16), and of the exact sum within the rounding of both operands (2·2⁻⁸ relative per term)
/// for bf16.
template <class Factors>
void check_sums(la::Format precision, const std::vector<float>& out, std::size_t rows, std::size_t cols, std::size_t terms,
                Factors factors, const float* bias = nullptr) {
  const auto r = [&](float value) { return precision == la::Format::bf16 ? double(bf16_round(value)) : double(value); };
  std::size_t failures = 0;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      const double b0 = bias ? bias[j] : 0.0;
      double rounded = b0, exact = b0, magnitude = std::abs(b0);
      for (std::size_t t = 0; t < terms; ++t) {
        const auto [u, v] = factors(i, j, t);
        rounded += r(u) * r(v);
        exact += double(u) * v;
        magnitude += std::abs(double(u) * v);
      }
      const double got = out[i * cols + j];
      failures += !(std::abs(got - rounded) <= double(terms + 1) * 0x1p-24 * magnitude + 1e-30);
      failures += !(std::abs(got - exact) <=
                    (precision == la::Format::bf16 ? 0x1p-7 : double(terms + 1) * 0x1p-24) * magnitude + 1e-30);
    }
  CHECK(failures == 0);
}
}  // namespace

TEST_CASE("bf16_matmul over an empty sum (K = 0): every layout writes 0, or leaves C as it was when accumulating") {
  const std::size_t M = 5, N = 70;
  for (const auto isa : cpu_isas()) {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const bool accumulate : {false, true}) {
          CAPTURE(isa_name(isa));
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(accumulate);
          const std::vector<float> a(M * N + 1, 1.0f), b(M * N + 1, 1.0f);  // never read
          std::vector<float> c(M * N, 7.0f);
          la::detail_bf16::matmul(isa, ta, tb, M, N, 0, a.data(), ta ? M : 1, b.data(), tb ? 1 : N, c.data(), N,
                                  accumulate);
          std::size_t wrong = 0;
          for (const float v : c) wrong += v != (accumulate ? 7.0f : 0.0f);
          CHECK(wrong == 0);
        }
  }
}

TEST_CASE("bf16 products of a linear map: forward and both backward products agree with float within bf16 rounding; "
          "double maps refuse them") {
  const std::uint64_t seed = cqtest::test_seed(20261126, "bf16 linear map products");
  std::mt19937_64 rng(seed);
  const std::size_t M = 37, K = 70, N = 29;
  const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.1), b = normal_vector(N, rng),
             dy = normal_vector(M * N, rng);
  const TensorView<const float, 1> bias(b.data(), {N});
  for (const auto precision : {la::Format::f32, la::Format::bf16}) {
    CAPTURE(la::format_name(precision));
    std::vector<float> y(M * N), dx(M * K, 0.0f), dw(N * K, 0.0f);
    const auto W = la::Weight<const float>(c2(w, N, K)).with_precision(precision);
    la::linear_forward<float>(v2(y, M, N), c2(x, M, K), W, bias);
    la::linear_backward_input<float>(v2(dx, M, K), c2(dy, M, N), W);
    la::linear_backward_weight<float>(v2(dw, N, K), c2(dy, M, N), c2(x, M, K), nullptr, precision);
    check_sums(precision, y, M, N, K,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{x[i * K + t], w[j * K + t]}; }, b.data());
    check_sums(precision, dx, M, K, N,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{dy[i * N + t], w[t * K + j]}; });
    check_sums(precision, dw, N, K, M,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{dy[t * N + i], x[t * K + j]}; });
  }
  std::vector<double> xd(4), wd(4), yd(4);
  CHECK_THROWS_WITH_AS(la::linear_forward<double>(TensorView<double, 2>(yd.data(), {2, 2}), TensorView<const double, 2>(xd.data(), {2, 2}),
                                                  la::Weight<const double>(TensorView<const double, 2>(wd.data(), {2, 2}))
                                                      .with_precision(la::Format::bf16)),
                       doctest::Contains("bf16 products serve float models only"), cq::DomainError);
  CHECK(la::parse_precision("bf16") == la::Format::bf16);
  CHECK_THROWS_WITH_AS(la::parse_precision("fp16"), doctest::Contains("unknown precision 'fp16': expected f32 or bf16"),
                       cq::DomainError);
}

TEST_CASE("bf16 products of the Cauchy linear map (the class head in mixed precision): loc_S, scale_S and the four "
          "backward products agree with double sums over the rounded operands") {
  const std::uint64_t seed = cqtest::test_seed(20261127, "bf16 cauchy linear");
  std::mt19937_64 rng(seed);
  const std::size_t R = 37, C = 70, N = 29;  // more than 16 rows: the GEMM path
  auto w = normal_vector(N * C, rng, 0.1);
  w[5] = 0.0f;  // sign(0) = 0 in the scale part of dW
  const auto loc_a = normal_vector(R * C, rng), b = normal_vector(N, rng), d_loc = normal_vector(R * N, rng),
             d_scale = normal_vector(R * N, rng);
  std::vector<float> scale_a = normal_vector(R * C, rng), abs_w(N * C);
  for (auto& s : scale_a) s = std::abs(s) + 0.1f;
  for (std::size_t i = 0; i < w.size(); ++i) abs_w[i] = std::abs(w[i]);
  const auto sign = [&](std::size_t i) { return float((w[i] > 0) - (w[i] < 0)); };
  for (const auto precision : {la::Format::f32, la::Format::bf16}) {
    CAPTURE(la::format_name(precision));
    std::vector<float> loc_s(R * N), scale_s(R * N), da_loc(R * C, 0.0f), da_scale(R * C, 0.0f), dw(N * C, 0.0f);
    const auto a = cq::assume_cauchy_view<cq::Kind::independent>(c2(loc_a, R, C), c2(scale_a, R, C));
    const auto W = la::Weight<const float>(c2(w, N, C)).with_abs(c2(abs_w, N, C)).with_precision(precision);
    la::cauchy_linear<float, cq::Kind::independent>({v2(loc_s, R, N), v2(scale_s, R, N)}, W,
                                                    TensorView<const float, 1>(b.data(), {N}), a);
    check_sums(precision, loc_s, R, N, C,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{loc_a[i * C + t], w[j * C + t]}; }, b.data());
    check_sums(precision, scale_s, R, N, C,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{scale_a[i * C + t], abs_w[j * C + t]}; });
    la::cauchy_linear_backward<float>({v2(da_loc, R, C), v2(da_scale, R, C)}, v2(dw, N, C),
                                      {c2(d_loc, R, N), c2(d_scale, R, N)}, W, a, nullptr);
    check_sums(precision, da_loc, R, C, N,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{d_loc[i * N + t], w[t * C + j]}; });
    check_sums(precision, da_scale, R, C, N,
               [&](std::size_t i, std::size_t j, std::size_t t) { return std::pair{d_scale[i * N + t], abs_w[t * C + j]}; });
    // dW = dS_locᵀ·loc_A + sign(W) ⊙ (dS_scaleᵀ·scale_A): the two sums against one double sum of
    // 2R terms (the sign is exact, and scales the second sum's terms)
    check_sums(precision, dw, N, C, 2 * R, [&](std::size_t i, std::size_t j, std::size_t t) {
      return t < R ? std::pair{d_loc[t * N + i], loc_a[t * C + j]}
                   : std::pair{sign(i * C + j) * d_scale[(t - R) * N + i], scale_a[(t - R) * C + j]};
    });
  }
}

TEST_CASE("bf16_matmul reading a bf16 copy of W (mixed-precision training's kept copies) gives the bits of rounding W "
          "itself: X·Wᵀ and dY·W, both kernels, a copy starting past the first panel group and ending before the store does, the "
          "copy read as |W|; a copy of another shape is refused") {
  const std::uint64_t seed = cqtest::test_seed(20261126, "bf16_matmul copies");
  std::mt19937_64 rng(seed);
  // rows of W odd, a single group, tails of 16 columns, wider than one task of the pairing (256 columns);
  // M = 3 and 2 (at most panel_read_max_rows): dY·W on AVX2 reads the copy's panels in its kernel,
  // M = 13, 40, 17: it pairs them block by block first
  constexpr std::array<std::array<std::size_t, 3>, 5> copy_shapes{{{3, 7, 5}, {13, 33, 17}, {40, 130, 300}, {2, 64, 4}, {17, 300, 96}}};
  static_assert(la::detail_bf16::panel_read_max_rows >= 3 && la::detail_bf16::panel_read_max_rows < 13);
  for (const auto [M, K, N] : copy_shapes) {  // X [M,K], W [N,K]; dY [M,N]
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    const auto x = normal_vector(M * K, rng), dy = normal_vector(M * N, rng);
    auto w_rows = normal_vector((N + 8) * K, rng, 0.05);
    // the store holds 4 more rows before W and 4 after: W's copy starts at row 4 of its panels,
    // and for odd N the pair of its last row lies beside a row of the store that is not W's,
    // which holds an infinity (0·∞ would make the sums NaN)
    w_rows[(N + 4) * K] = std::numeric_limits<float>::infinity();
    const la::PackedMatrix store(la::Format::bf16, c2(w_rows, N + 8, K));
    const la::PackedRef copy = store.ref().rows_from(4, N);
    const float* w = w_rows.data() + 4 * K;
    for (const auto kernel : {la::Bf16Kernel::portable, la::Bf16Kernel::avx2, la::Bf16Kernel::automatic}) {
      la::set_bf16_kernel(kernel);
      CAPTURE(la::bf16_kernel_name());
      std::vector<float> y(M * N, 3.0f), y_copy(M * N, 3.0f), dx(M * K, 1.0f), dx_copy(M * K, 1.0f);
      la::bf16_matmul(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, w, K, y.data(), N, false);
      la::bf16_matmul(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, w, K, y_copy.data(), N, false, copy);
      la::bf16_matmul(la::Op::plain, la::Op::plain, M, K, N, dy.data(), N, w, K, dx.data(), K, true);
      la::bf16_matmul(la::Op::plain, la::Op::plain, M, K, N, dy.data(), N, w, K, dx_copy.data(), K, true, copy);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < y.size(); ++i) differ += !same_bits(y[i], y_copy[i]);
      for (std::size_t i = 0; i < dx.size(); ++i) differ += !same_bits(dx[i], dx_copy[i]);
      CHECK(differ == 0);
      // the copy read as |W| (the Cauchy scale products of W_cls): the bits of the products with |W|'s floats
      std::vector<float> abs_w(N * K);
      for (std::size_t i = 0; i < abs_w.size(); ++i) abs_w[i] = std::fabs(w[i]);
      std::vector<float> ya(M * N), ya_copy(M * N), ya_decode(M * N), dxa(M * K, 1.0f), dxa_copy(M * K, 1.0f);
      la::bf16_matmul(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, abs_w.data(), K, ya.data(), N, false);
      la::bf16_matmul(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, abs_w.data(), K, ya_copy.data(), N, false,
                      copy.abs_values());
      la::bf16_linear_forward(cq::TensorView<float, 2>(ya_decode.data(), {M, N}), c2(x, M, K), copy.abs_values());
      la::bf16_matmul(la::Op::plain, la::Op::plain, M, K, N, dy.data(), N, abs_w.data(), K, dxa.data(), K, true);
      la::bf16_matmul(la::Op::plain, la::Op::plain, M, K, N, dy.data(), N, abs_w.data(), K, dxa_copy.data(), K, true,
                      copy.abs_values());
      std::size_t differ_abs = 0, differ_from_w = 0;
      for (std::size_t i = 0; i < ya.size(); ++i) {
        differ_abs += !same_bits(ya[i], ya_copy[i]) + !same_bits(ya[i], ya_decode[i]);
        differ_from_w += !same_bits(ya[i], y_copy[i]);
      }
      for (std::size_t i = 0; i < dxa.size(); ++i) differ_abs += !same_bits(dxa[i], dxa_copy[i]);
      CHECK(differ_abs == 0);
      CHECK(differ_from_w > 0);  // the products with |W| are not those with W
    }
    la::set_bf16_kernel(la::Bf16Kernel::automatic);
    std::vector<float> y(M * N);
    CHECK_THROWS_WITH_AS(la::bf16_matmul(la::Op::plain, la::Op::transposed, M, N + 1, K, x.data(), K, w, K, y.data(), N + 1, false,
                                         store.ref().rows_from(4, N)),
                         doctest::Contains("is not B"), cq::DomainError);
  }
}
