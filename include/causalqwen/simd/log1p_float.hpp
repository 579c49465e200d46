#pragma once
/// log(1 + x) of a float array whose values lie in [0, 1] (softplus's log1p(e^{−|x|})), 16 at
/// a time on AVX-512, with the very bits of the C library's scalar `std::log1p(float)`.
///
/// glibc's log1pf (the fdlibm algorithm, float arithmetic, no fused multiply-adds) takes, for
/// x ≥ 0:
///   x < 2^-29             log1p(x) = x (the correction is below half an ulp);
///   x < 0.41422 (k = 0)   f = x;
///   otherwise             u = 1 + x, k = u's exponent, c = (1 − (u − x)) or (x − (u − 1)),
///                         c = c/u, u's mantissa scaled into [√2/2, √2) (k + 1 when halved),
///                         f = u − 1;
/// then with hfsq = ½f·f, s = f/(2 + f), z = s², R = z·(Lp1 + z·(Lp2 + … + z·Lp7)):
///   k = 0:  f − (hfsq − s·(hfsq + R))
///   k > 0:  k·ln2_hi − ((hfsq − (s·(hfsq + R) + (k·ln2_lo + c))) − f)
/// and, where the scaled mantissa leaves f within 2^-20 of 0, R = hfsq·(1 − ⅔f) in place of
/// the series (f = 0 exactly: k·ln2_hi + (c + k·ln2_lo)). Each float operation is correctly
/// rounded, so the same operations in the same order on 16 lanes give the same floats, provided
/// no multiply and add are contracted into one fused instruction (which rounds once where the
/// scalar rounds twice). The kernel's products are therefore instructions with an explicit
/// rounding mode (round to nearest, the default mode the C library runs in): neither GCC nor
/// Clang fuses those with an add, whatever -ffp-contract says (GCC's default `fast` would
/// otherwise fuse them, as would Clang's under -ffp-contract=fast, where its fp-contract pragma
/// does not reach the intrinsics' own arithmetic).
///
/// The vector path is used only where it is proven on the spot: the first call compares it with
/// `std::log1p` on 4,096 inputs over every binade of [0, 1] and the branches' edges, and keeps
/// to the scalar loop if any bit differs (another C library, a CPU without AVX-512). A block of
/// 16 holding a value outside [0, 1] (or NaN) runs the scalar function.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_LOG1P_KERNEL 1
#endif

namespace causalqwen {

namespace detail_log1p {

/// The algorithm's constants (float bits): ln 2 split in a high part with trailing zeros and the
/// rest, and the series' coefficients.
inline constexpr std::uint32_t ln2_hi_bits = 0x3f317180u, ln2_lo_bits = 0x3717f7d1u;
inline constexpr std::uint32_t lp_bits[7] = {0x3f2aaaabu, 0x3ecccccdu, 0x3e924925u, 0x3e638e29u,
                                             0x3e3a3325u, 0x3e1cd04fu, 0x3e178897u};

#ifdef CAUSALQWEN_LOG1P_KERNEL
/// a·b rounded to nearest, as an instruction of its own: a product with an explicit rounding
/// mode is never contracted with a following add or subtract into a fused multiply-add.
__attribute__((target("avx512f"))) inline __m512 mul_unfused(__m512 a, __m512 b) {
  return _mm512_mul_round_ps(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/// 16 values x ∈ [0, 1] → log1p(x), in the scalar's operations (file comment).
__attribute__((target("avx512f"))) inline __m512 log1p_unit16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f), half = _mm512_set1_ps(0.5f);
  const __m512i hx = _mm512_castps_si512(x);
  // k > 0 lanes: u = 1 + x, k from u's exponent, the correction c, the mantissa brought near 1
  const __m512 u = _mm512_add_ps(one, x);
  const __m512i hu_full = _mm512_castps_si512(u);
  __m512i k = _mm512_sub_epi32(_mm512_srai_epi32(hu_full, 23), _mm512_set1_epi32(127));
  const __mmask16 k_positive = _mm512_cmpgt_epi32_mask(k, _mm512_setzero_si512());
  const __m512 c_pos = _mm512_sub_ps(one, _mm512_sub_ps(u, x));
  const __m512 c_zero = _mm512_sub_ps(x, _mm512_sub_ps(u, one));
  const __m512 c = _mm512_div_ps(_mm512_mask_blend_ps(k_positive, c_zero, c_pos), u);
  const __m512i mant = _mm512_and_si512(hu_full, _mm512_set1_epi32(0x007fffff));
  const __mmask16 below_sqrt2 = _mm512_cmplt_epi32_mask(mant, _mm512_set1_epi32(0x3504f7));
  const __m512 u_scaled = _mm512_castsi512_ps(_mm512_mask_blend_epi32(
      below_sqrt2, _mm512_or_si512(mant, _mm512_set1_epi32(0x3f000000)), _mm512_or_si512(mant, _mm512_set1_epi32(0x3f800000))));
  k = _mm512_mask_add_epi32(k, ~below_sqrt2, k, _mm512_set1_epi32(1));
  __m512i hu = _mm512_mask_blend_epi32(
      below_sqrt2, _mm512_srai_epi32(_mm512_sub_epi32(_mm512_set1_epi32(0x00800000), mant), 2), mant);
  // the k = 0 lanes (x < 0.41422): f = x, hu ≠ 0
  const __mmask16 small = _mm512_cmplt_epi32_mask(hx, _mm512_set1_epi32(0x3ed413d7));
  k = _mm512_mask_mov_epi32(k, small, _mm512_setzero_si512());
  hu = _mm512_mask_mov_epi32(hu, small, _mm512_set1_epi32(1));
  const __m512 f = _mm512_mask_blend_ps(small, _mm512_sub_ps(u_scaled, one), x);
  const __m512 kf = _mm512_cvtepi32_ps(k);
  const __mmask16 k_zero = _mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512());
  const __m512 ln2_hi = _mm512_set1_ps(std::bit_cast<float>(ln2_hi_bits));
  const __m512 ln2_lo = _mm512_set1_ps(std::bit_cast<float>(ln2_lo_bits));
  const __m512 k_hi = mul_unfused(kf, ln2_hi), k_lo = mul_unfused(kf, ln2_lo);
  const __m512 hfsq = mul_unfused(mul_unfused(half, f), f);
  // the series
  const __m512 s = _mm512_div_ps(f, _mm512_add_ps(two, f));
  const __m512 z = mul_unfused(s, s);
  __m512 p = _mm512_set1_ps(std::bit_cast<float>(lp_bits[6]));
  for (int i = 5; i >= 0; --i) p = _mm512_add_ps(_mm512_set1_ps(std::bit_cast<float>(lp_bits[i])), mul_unfused(z, p));
  const __m512 R = mul_unfused(z, p);
  const __m512 s_hR = mul_unfused(s, _mm512_add_ps(hfsq, R));
  const __m512 series_k0 = _mm512_sub_ps(f, _mm512_sub_ps(hfsq, s_hR));
  const __m512 series_k =
      _mm512_sub_ps(k_hi, _mm512_sub_ps(_mm512_sub_ps(hfsq, _mm512_add_ps(s_hR, _mm512_add_ps(k_lo, c))), f));
  __m512 y = _mm512_mask_blend_ps(k_zero, series_k, series_k0);
  // f within 2^-20 of 0 (hu = 0): the short form
  const __mmask16 hu_zero = _mm512_cmpeq_epi32_mask(hu, _mm512_setzero_si512());
  if (hu_zero) {
    const __m512 R2 = mul_unfused(hfsq, _mm512_sub_ps(one, mul_unfused(_mm512_set1_ps(std::bit_cast<float>(lp_bits[0])), f)));
    const __m512 short_k0 = _mm512_sub_ps(f, R2);
    const __m512 short_k = _mm512_sub_ps(k_hi, _mm512_sub_ps(_mm512_sub_ps(R2, _mm512_add_ps(k_lo, c)), f));
    const __m512 exact_k = _mm512_add_ps(k_hi, _mm512_add_ps(c, k_lo));  // f = 0
    const __mmask16 f_zero = _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ);
    __m512 y_short = _mm512_mask_blend_ps(k_zero, short_k, short_k0);
    y_short = _mm512_mask_blend_ps(f_zero, y_short, _mm512_mask_blend_ps(k_zero, exact_k, _mm512_setzero_ps()));
    y = _mm512_mask_blend_ps(hu_zero, y, y_short);
  }
  // x < 2^-29: x itself
  return _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(hx, _mm512_set1_epi32(0x31000000)), y, x);
}

/// The array form: blocks of 16 within [0, 1] on vectors, any other block on the scalar.
__attribute__((target("avx512f"))) inline void log1p_unit_avx512(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    const std::size_t m = n - i < 16 ? n - i : 16;
    const __mmask16 live = m == 16 ? __mmask16(0xFFFF) : __mmask16((1u << m) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    const __m512i bits = _mm512_castps_si512(v);
    // +0 ≤ v ≤ 1 as integers: no sign bit, not above 1.0f's bits (so no NaN, no ∞)
    const __mmask16 in_unit = _mm512_cmple_epu32_mask(bits, _mm512_set1_epi32(0x3f800000));
    if ((in_unit & live) != live) {
      for (std::size_t j = i; j < i + m; ++j) y[j] = std::log1p(x[j]);
      continue;
    }
    _mm512_mask_storeu_ps(y + i, live, log1p_unit16(v));
  }
}
#endif

/// Whether the vector path gives std::log1p's bits on 4,096 inputs of [0, 1]: every binade's
/// first values, the branches' edges and pseudo-random bits.
inline bool vector_path_agrees() {
#ifdef CAUSALQWEN_LOG1P_KERNEL
  float x[4096];
  std::size_t n = 0;
  for (const std::uint32_t b : {0x00000000u, 0x00000001u, 0x00800000u, 0x24800000u, 0x31000000u, 0x3ed413d7u,
                                0x3f3504f3u, 0x3f7fffffu, 0x3f800000u, 0x3f7ffffdu, 0x3f7ffffeu, 0x3e800000u}) {
    x[n++] = std::bit_cast<float>(b);
    if (b > 0) x[n++] = std::bit_cast<float>(b - 1);
  }
  std::uint32_t state = 2463534242u;
  while (n < 4096) {
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;  // xorshift32
    x[n++] = std::bit_cast<float>(state % 0x3f800001u);
  }
  float y[4096];
  log1p_unit_avx512(x, y, n);
  for (std::size_t i = 0; i < n; ++i)
    if (std::bit_cast<std::uint32_t>(y[i]) != std::bit_cast<std::uint32_t>(std::log1p(x[i]))) return false;
  return true;
#else
  return false;
#endif
}

/// Whether the vector path runs here (asked once: CPU features, then the agreement check).
inline bool use_vector_path() {
#ifdef CAUSALQWEN_LOG1P_KERNEL
  static const bool use = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && vector_path_agrees();
  }();
  return use;
#else
  return false;
#endif
}

}  // namespace detail_log1p

/// Whether `log1p_unit_float` runs 16 values at a time here (AVX-512 and a C library whose
/// log1pf it matches), or the scalar loop.
inline bool log1p_unit_float_is_vectorised() { return detail_log1p::use_vector_path(); }

/// y[i] = log(1 + x[i]) for i < n, each equal to `std::log1p(x[i])` bit for bit (x and y may
/// alias); fast for x[i] ∈ [0, 1], correct for any x.
inline void log1p_unit_float(const float* x, float* y, std::size_t n) {
#ifdef CAUSALQWEN_LOG1P_KERNEL
  if (detail_log1p::use_vector_path()) {
    detail_log1p::log1p_unit_avx512(x, y, n);
    return;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) y[i] = std::log1p(x[i]);
}

}  // namespace causalqwen
