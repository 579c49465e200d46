/// Counter-based random numbers for generation: every draw is a pure function of
/// (row seed, stream tag, step, index), so a row's noise does not depend on the batch it is in,
/// on the order of draws, or on how many other rows or steps consumed numbers before it.
///   x = splitmix64 chained over (seed, tag, step, index);  u = (⌊x / 2¹¹⌋ + ½) / 2⁵³ ∈ (0, 1)
#pragma once
#include "causalqwen/core/random.hpp"

#include <cstdint>

namespace causalqwen::generate {

/// What a uniform is drawn for (distinct streams of one row).
enum class NoiseTag : std::uint64_t { action = 1, token_pick = 2 };

/// The random stream of one generated row.
struct RowStream {
  std::uint64_t seed = 0;

  /// A uniform in the open interval (0, 1), never 0 or 1 (53 random bits, centred).
  double uniform(NoiseTag tag, std::uint64_t step, std::uint64_t index) const noexcept {
    std::uint64_t x = splitmix64(seed);
    x = splitmix64(x ^ static_cast<std::uint64_t>(tag));
    x = splitmix64(x ^ step);
    x = splitmix64(x ^ (index * 0xd1b54a32d192ed03ULL));
    return (static_cast<double>(x >> 11) + 0.5) * 0x1.0p-53;
  }
};

/// The seed of row `row` of a request seeded with `seed` (rows of one request differ; the same
/// (seed, row) gives the same stream in any batch).
constexpr std::uint64_t row_seed(std::uint64_t seed, std::uint64_t row) noexcept {
  return splitmix64(seed ^ splitmix64(row + 0x5851f42d4c957f2dULL));
}

}  // namespace causalqwen::generate
