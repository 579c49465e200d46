/// bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the top half of a float) and its conversions
/// from and to float, used by the checkpoint files and by the optimiser's 16-bit moments.
///   widening     exact for every bit pattern (zeros, subnormals, infinities, NaN payloads)
///   nearest      round to nearest, ties to even; overflow to ±∞; NaN stays a quiet NaN
///   stochastic   round up with probability (dropped 16 bits)/2¹⁶ given 16 random bits: an
///                unbiased rounding, E[bf16(x)] = x; NaN and ±∞ are truncated
#pragma once
#include <bit>
#include <cstdint>

namespace causalqwen {

/// The float whose top 16 bits are `bits`: exact.
constexpr float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// The bfloat16 nearest to `value` (ties to even); NaN stays a quiet NaN of the same sign.
constexpr std::uint16_t float_to_bf16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep sign and top payload, force quiet
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);  // may carry into ±inf: correct
}

/// bfloat16 bits of `value` rounded stochastically with the low 16 bits of `random16`
/// (NaN and ±∞ truncated). Branch-free, so loops over it vectorise.
constexpr std::uint16_t float_to_bf16_stochastic(float value, std::uint32_t random16) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t add = (bits & 0x7f800000u) != 0x7f800000u ? (random16 & 0xffffu) : 0u;  // a select
  return static_cast<std::uint16_t>((bits + add) >> 16);
}

}  // namespace causalqwen
