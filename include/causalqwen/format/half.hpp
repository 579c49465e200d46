/// Exact conversions between float and the two 16-bit float formats of checkpoints:
/// bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the top half of a float; core/bfloat16.hpp)
/// and IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits). Widening is exact for every bit
/// pattern (zeros, subnormals, infinities, NaN payloads); narrowing rounds to nearest, ties to
/// even, overflows to infinity and keeps NaN a (quiet) NaN of the same sign.
#pragma once
#include "causalqwen/core/bfloat16.hpp"

#include <bit>
#include <cstdint>

namespace causalqwen::format {

/// The IEEE binary16 value `bits` as a float: exact (subnormals become normal floats).
constexpr float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F)  // infinity or NaN (payload kept in the top mantissa bits)
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0)  // normal: rebias 15 → 127
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);  // ±0
  // Subnormal: m·2⁻²⁴. After k left shifts bringing the leading bit to position 10, the value
  // is (1 + fraction)·2^(−14−k), a normal float with biased exponent 127 − 14 − k.
  int shifts = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shifts;
  }
  const std::uint32_t float_exponent = static_cast<std::uint32_t>(127 - 14 - shifts);
  return std::bit_cast<float>(sign | (float_exponent << 23) | ((mantissa & 0x3FFu) << 13));
}

/// The IEEE binary16 nearest to `value` (ties to even, gradual underflow to subnormals and
/// zero, overflow to infinity); NaN stays a quiet NaN of the same sign.
constexpr std::uint16_t float_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u)  // ≥ 65520 = halfway past the largest half (65504): ±inf
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {  // normal half: drop 13 mantissa bits with rounding to nearest even
    const std::uint32_t rebased = magnitude - (112u << 23);
    const std::uint32_t rounded = rebased + 0x0FFFu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal (2⁻²⁵): ±0
  // Subnormal half: value = m·2⁻²⁴ with m = significand·2^(exponent+24-23), rounded to even.
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const int shift = -exponent - 1;  // 14..24 for exponent -15..-25
  const std::uint32_t truncated = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1);
  std::uint32_t m = truncated;
  if (remainder > halfway || (remainder == halfway && (truncated & 1u))) ++m;
  return static_cast<std::uint16_t>(sign | m);  // m = 0x400 rounds up into the smallest normal
}

}  // namespace causalqwen::format
