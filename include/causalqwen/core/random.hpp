/// SplitMix64 (Steele, Lea, Flood 2014), the one 64-bit mixer of the library: the generation
/// noise streams, the data layer's generator and the optimiser's stochastic rounding all draw
/// from it, so a seed means the same numbers everywhere.
///   splitmix64_mix(x) = x ⊕ (x ≫ 31) after two multiply-xorshift rounds (a bijection of 64 bits)
///   splitmix64(x)     = splitmix64_mix(x + γ),  γ = 0x9e3779b97f4a7c15 (⌊2⁶⁴/φ⌋, odd)
/// The generator SplitMix64 with state s outputs splitmix64(s) and steps s ← s + γ.
#pragma once
#include <cstdint>

namespace causalqwen {

/// SplitMix64's increment γ = ⌊2⁶⁴/φ⌋ (odd, so s ← s + γ visits all 2⁶⁴ states).
inline constexpr std::uint64_t splitmix64_gamma = 0x9e3779b97f4a7c15ULL;

/// SplitMix64's finaliser: a bijective 64-bit mix (no increment).
constexpr std::uint64_t splitmix64_mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// One SplitMix64 step applied to x: splitmix64_mix(x + γ). Used to derive independent seeds.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept { return splitmix64_mix(x + splitmix64_gamma); }

}  // namespace causalqwen
