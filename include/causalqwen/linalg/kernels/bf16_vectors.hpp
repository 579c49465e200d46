/// Vector helpers the bf16 kernels share: floats rounded to bf16 16 at a time in AVX-512
/// registers (round16: vcvtneps2bf16, or integer arithmetic for a vector with a subnormal) and
/// 8 at a time in AVX2 registers (round8_avx2, rounded8_avx2), bf16 values widened to floats
/// (widen8_avx2), and the lane masks of a vector's first n lanes. Defined where
/// CAUSALQWEN_BF16_KERNEL is (kernels/bf16_cpu.hpp).
#pragma once
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#ifdef CAUSALQWEN_BF16_KERNEL
namespace causalqwen::linalg::detail_bf16 {

/// bf16 (nearest even; NaN stays a quiet NaN) of 16 floats: float_to_bf16, 16 at a time, in
/// integer arithmetic.
CAUSALQWEN_TARGET_BF16 inline __m256i round16_integer(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                                 _mm512_set1_epi32(0x7F800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

/// Whether any of the floats is subnormal (vfpclassps, category 0x20).
CAUSALQWEN_TARGET_BF16 inline bool any_subnormal(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x20) != 0; }

/// round16_integer's bits in one instruction, vcvtneps2bf16: it rounds to nearest even and
/// quiets a NaN as float_to_bf16 does, but reads a subnormal float as a zero of its sign, so a
/// vector holding one (rare: |x| < 2⁻¹²⁶) takes the integer rounding instead.
CAUSALQWEN_TARGET_BF16 inline __m256i round16(__m512 v) {
  if (any_subnormal(v)) [[unlikely]]
    return round16_integer(v);
  return (__m256i)_mm512_cvtneps_pbh(v);
}

/// Lanes [0, n) set (n ≤ 16).
inline __mmask16 first_lanes(std::size_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

/// bf16(v) as floats (the rounded value, its low 16 bits 0): float_to_bf16's rounding, 8 lanes
/// (nearest even; a NaN quieted, its sign and top payload kept).
CAUSALQWEN_TARGET_AVX2 inline __m256i round8_avx2(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  return _mm256_and_si256(_mm256_blendv_epi8(rounded, quiet, nan), _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
}

/// Lanes [0, n) of 8 set, as AVX2's masked loads and stores take them.
CAUSALQWEN_TARGET_AVX2 inline __m256i first_lanes_avx2(std::size_t n) {
  const int count = static_cast<int>(std::min<std::size_t>(n, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The 8 floats at `at`, all of them when `whole`, else the lanes `mask` sets (0 in the others).
/// (A function with the target attribute, not a lambda: GCC gives a lambda inside a target
/// function the translation unit's instruction set, and without -mavx2 the intrinsics then fail.)
CAUSALQWEN_TARGET_AVX2 inline __m256 load8_avx2(const float* at, bool whole, __m256i mask) {
  return whole ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, mask);
}

/// bf16(src[k]) for k < n (≤ 8), 0 past n: floats.
CAUSALQWEN_TARGET_AVX2 inline __m256 rounded8_avx2(const float* src, std::size_t n) {
  if (n == 0) return _mm256_setzero_ps();
  const __m256 v = n >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, first_lanes_avx2(n));
  return _mm256_castsi256_ps(round8_avx2(v));
}

/// 8 bf16 values at `words`, their bits and-ed with value_bits (0x7FFF each: |values|), as floats.
CAUSALQWEN_TARGET_AVX2 inline __m256 widen8_avx2(const std::uint16_t* words, __m128i value_bits) {
  const __m128i bits = _mm_and_si128(value_bits, _mm_loadu_si128(reinterpret_cast<const __m128i*>(words)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

}  // namespace causalqwen::linalg::detail_bf16
#endif
