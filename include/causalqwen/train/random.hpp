/// The data layer's random numbers: SplitMix64, a 64-bit generator whose whole state is one
/// integer, so a data source's position is saved exactly in a JSON checkpoint. Every draw is
/// defined here (no std:: distributions, whose results differ between standard libraries), so
/// the same seed gives the same data on every platform.
#pragma once
#include "causalqwen/core/random.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <utility>
#include <vector>

namespace causalqwen::train {

/// FNV-1a 64-bit hash of bytes (stable across platforms and runs).
inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = 0xCBF29CE484222325ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

/// SplitMix64 (core/random.hpp): output splitmix64(s), then s ← s + γ. Period 2^64.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed = 0) : state_(seed) {}

  /// The next 64 random bits.
  std::uint64_t next() {
    state_ += splitmix64_gamma;
    return splitmix64_mix(state_);
  }
  /// Uniform integer in [0, n) (n > 0), unbiased (rejection of the short last block).
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  /// Uniform integer in [lo, hi].
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  /// Uniform double in (0, 1): (k + ½)/2^53 for a random 53-bit k.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  /// Standard normal (Box–Muller, one value per call).
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }
  /// Cauchy(loc, scale): loc + scale·tan(π(u − ½)).
  double cauchy(double loc, double scale) {
    return loc + scale * std::tan(std::numbers::pi * (uniform() - 0.5));
  }
  /// True with probability p.
  bool chance(double p) { return uniform() < p; }

  /// The whole state (restore with set_state for an exact continuation).
  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t s) { state_ = s; }

 private:
  std::uint64_t state_;
};

/// A uniformly random permutation of 0..n−1 (Fisher–Yates driven by rng).
inline std::vector<std::size_t> random_permutation(std::size_t n, SplitMix64& rng) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

}  // namespace causalqwen::train
