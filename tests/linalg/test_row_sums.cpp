// linalg::ordered_row_sums: each row's sum in index order, 16 rows side by side on AVX-512, gives
// the bits of the scalar loop for any number of rows, any lengths (0, 1, across and within
// 16-column blocks, rows in any order of length), values far apart in magnitude (where the order
// of the additions decides the result), infinities and NaN; it reads no element past a row's
// length and writes no sum past `rows`.
#include "../support/test_support.hpp"

#include <causalqwen/linalg/row_sums.hpp>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace la = causalqwen::linalg;

namespace {
/// The reference: a plain loop from +0 in index order.
float scalar_sum(const float* x, std::size_t n) {
  float sum = 0.0f;
  for (std::size_t j = 0; j < n; ++j) sum += x[j];
  return sum;
}
}  // namespace

TEST_CASE("ordered_row_sums: the scalar loop's bits for any rows and lengths") {
  const auto seed = cqtest::test_seed(20261126, "ordered_row_sums");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (std::size_t rows : {1u, 2u, 15u, 16u, 17u, 33u, 40u}) {
    for (std::size_t max_len : {1u, 7u, 16u, 31u, 64u, 200u}) {
      const std::size_t ld = max_len + 5;
      // values spread over 60 binades: a sum taken in another order differs in its last bits
      std::vector<float> x(rows * ld);
      for (auto& v : x) v = std::ldexp(unit(rng), exponent(rng));
      std::vector<std::size_t> lengths(rows);
      std::uniform_int_distribution<std::size_t> length(0, max_len);
      for (auto& n : lengths) n = length(rng);
      lengths[0] = max_len;  // at least one row as long as the block
      // poison past each row's length: a read there would show in the sums
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = lengths[r]; j < ld; ++j) x[r * ld + j] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> sums(rows + 1, 42.0f);
      la::ordered_row_sums(x.data(), ld, rows, lengths.data(), sums.data());
      std::size_t differ = 0;
      for (std::size_t r = 0; r < rows; ++r)
        differ += std::bit_cast<std::uint32_t>(sums[r]) != std::bit_cast<std::uint32_t>(scalar_sum(&x[r * ld], lengths[r]));
      INFO("seed ", seed, ", rows ", rows, ", longest ", max_len);
      CHECK(differ == 0);
      CHECK(sums[rows] == 42.0f);  // nothing written past the rows
    }
  }
}

TEST_CASE("ordered_row_sums: order-sensitive sums, infinities and NaN, empty rows") {
  // 1 + 2^-24 + 2^-24 in order is 1 (each tiny term is lost); the other order would give 1 + 2^-23
  const float tiny = std::ldexp(1.0f, -24), inf = std::numeric_limits<float>::infinity();
  const std::size_t ld = 4;
  std::vector<float> x = {1.0f, tiny, tiny, 0.0f,   // 1
                          tiny, tiny, 1.0f, 0.0f,   // 1 + 2^-23
                          inf, -inf, 1.0f, 0.0f,    // NaN
                          -0.0f, -0.0f, 0.0f, 0.0f, // +0 + (−0) + (−0) = +0
                          5.0f, 5.0f, 5.0f, 5.0f};  // length 0: +0
  const std::vector<std::size_t> lengths = {3, 3, 3, 2, 0};
  std::vector<float> sums(5);
  la::ordered_row_sums(x.data(), ld, 5, lengths.data(), sums.data());
  CHECK(sums[0] == 1.0f);
  CHECK(sums[1] == 1.0f + 2 * tiny);
  CHECK(std::isnan(sums[2]));
  CHECK(std::bit_cast<std::uint32_t>(sums[3]) == 0u);
  CHECK(std::bit_cast<std::uint32_t>(sums[4]) == 0u);
}
