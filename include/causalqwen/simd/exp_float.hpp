#pragma once
/// e^x of a float array, 16 values at a time on AVX-512 (8 on AVX2 with FMA), with the very bits of the C library's
/// scalar `std::exp(float)`, so a loop that switches to it gives the same results as before.
///
/// The scalar expf of glibc (2.27 and later, which runs its FMA build on a CPU with FMA) computes
/// in double: with N = 32, k = round(x·N/ln 2) and r = x·N/ln 2 − k (one fused multiply-add, the
/// product never rounded), e^x = 2^(k/N) · 2^(r/N) ≈ s · (C0·r³ + C1·r² + C2·r + 1), where
/// s = 2^(k/N) comes from a 32-entry table of 2^(i/N) with k/N's integer part added to the
/// exponent bits, and the polynomial is evaluated as fma(fma(C0, r, C1), r², fma(C2, r, 1)).
/// Each double operation is correctly rounded, so doing the same operations in the same order
/// on 8 double lanes gives the same double, and rounding it to float gives the same float.
/// Out-of-range inputs take the scalar's branches: x ≤ ln 2^-150 (−inf included) gives 0, x in
/// (ln 2^-150, ln 2^-149) gives the smallest subnormal, x > ln(FLT_MAX) gives +inf, NaN gives
/// NaN.
///
/// The vector path is used only where it is proven on the spot: the first call compares it
/// with `std::exp` on 4,096 inputs spread over every binade and the special values, and keeps
/// to the scalar loop if any bit differs (another C library, a CPU without AVX2 and FMA).
/// `exp_float_is_vectorised()` says which path runs; the test compares 184 M floats, and all
/// 2^32 when run with `--no-skip`.

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_EXP_KERNEL 1
#define CAUSALQWEN_TARGET_AVX512F __attribute__((target("avx512f,avx512dq,fma")))
#define CAUSALQWEN_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#endif

namespace causalqwen {

namespace detail_exp {

/// The scalar expf's constants (double bits): 32/ln 2, the shift 1.5·2^52 that rounds to an
/// integer, and the polynomial's C0, C1, C2 (already scaled by 1/N³, 1/N², 1/N).
inline constexpr std::uint64_t inv_ln2_n_bits = 0x40471547652b82feull, shift_bits = 0x4338000000000000ull,
                               c0_bits = 0x3ebc6af84b912394ull, c1_bits = 0x3f2ebfce50fac4f3ull,
                               c2_bits = 0x3f962e42ff0c52d6ull;
/// Thresholds of the scalar's branches: ln(FLT_MAX) rounded up, ln 2^-150 and ln 2^-149.
inline constexpr float overflow_above = 0x1.62e42ep6f, zero_below = -0x1.9fe368p6f,
                       denorm_min_below = -0x1.9d1d9ep6f;

/// Table entry i: the bits of 2^(i/32) rounded to double, minus i·2^47, so that adding k·2^47
/// (k's low 5 bits included) puts k/32's integer part into the exponent.
inline const std::uint64_t* table() {
  alignas(64) static const auto entries = [] {
    struct Entries {
      alignas(64) std::uint64_t v[32];
    } e{};
    for (std::uint64_t i = 0; i < 32; ++i) {
      const double p = static_cast<double>(std::exp2l(static_cast<long double>(i) / 32.0L));
      e.v[i] = std::bit_cast<std::uint64_t>(p) - (i << 47);
    }
    return e;
  }();
  return entries.v;
}

#ifdef CAUSALQWEN_EXP_KERNEL
/// Eight lanes of the scalar expf's main path ([8] floats widened to double).
CAUSALQWEN_TARGET_AVX512F inline __m256 exp8(__m256 x, const __m512i tab[4]) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d inv_ln2_n = _mm512_castsi512_pd(_mm512_set1_epi64(std::int64_t(inv_ln2_n_bits)));
  const __m512d shift = _mm512_castsi512_pd(_mm512_set1_epi64(std::int64_t(shift_bits)));
  const __m512d k_shifted = _mm512_fmadd_pd(inv_ln2_n, xd, shift);  // k + 1.5·2^52
  const __m512i k_bits = _mm512_castpd_si512(k_shifted);
  const __m512d k = _mm512_sub_pd(k_shifted, shift);
  const __m512d r = _mm512_fmsub_pd(inv_ln2_n, xd, k);  // x·N/ln 2 − k, one rounding
  // table[k mod 32]: entries 0–15 and 16–31 by two permutes, chosen by bit 4
  const __m512i low = _mm512_permutex2var_epi64(tab[0], k_bits, tab[1]);
  const __m512i high = _mm512_permutex2var_epi64(tab[2], k_bits, tab[3]);
  const __mmask8 upper = _mm512_test_epi64_mask(k_bits, _mm512_set1_epi64(16));
  const __m512i entry = _mm512_mask_blend_epi64(upper, low, high);
  const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(k_bits, 47)));
  const __m512d c0 = _mm512_castsi512_pd(_mm512_set1_epi64(std::int64_t(c0_bits)));
  const __m512d c1 = _mm512_castsi512_pd(_mm512_set1_epi64(std::int64_t(c1_bits)));
  const __m512d c2 = _mm512_castsi512_pd(_mm512_set1_epi64(std::int64_t(c2_bits)));
  const __m512d z = _mm512_fmadd_pd(c0, r, c1);
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(c2, r, _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(z, r2, y);
  return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/// y[i] = e^{x[i]} for n values, 16 at a time, the tail masked.
CAUSALQWEN_TARGET_AVX512F inline void exp_avx512(const float* x, float* y, std::size_t n) {
  const std::uint64_t* t = table();
  const __m512i tab[4] = {_mm512_load_si512(t), _mm512_load_si512(t + 8), _mm512_load_si512(t + 16),
                          _mm512_load_si512(t + 24)};
  const __m512 above = _mm512_set1_ps(overflow_above), zero_under = _mm512_set1_ps(zero_below),
               denorm_under = _mm512_set1_ps(denorm_min_below);
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 denorm_min = _mm512_set1_ps(std::numeric_limits<float>::denorm_min());
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    // the main path on inputs clamped into its range; the branches' lanes are replaced below
    const __m512 clamped = _mm512_max_ps(_mm512_min_ps(v, above), zero_under);
    __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(exp8(_mm512_castps512_ps256(clamped), tab)),
                                  exp8(_mm512_extractf32x8_ps(clamped, 1), tab), 1);
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(v, denorm_under, _CMP_LT_OQ), denorm_min);
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(v, zero_under, _CMP_LT_OQ), _mm512_setzero_ps());
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(v, above, _CMP_GT_OQ), inf);
    e = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v, v);  // NaN: x + x
    _mm512_mask_storeu_ps(y + i, live, e);
  }
}

/// Four lanes of the scalar expf's main path ([4] floats widened to double), on AVX2: exp8's
/// operations, the table entry by a gather.
CAUSALQWEN_TARGET_AVX2_FMA inline __m128 exp4(__m128 x, const std::uint64_t* t) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv_ln2_n = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(inv_ln2_n_bits)));
  const __m256d shift = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(shift_bits)));
  const __m256d k_shifted = _mm256_fmadd_pd(inv_ln2_n, xd, shift);  // k + 1.5·2^52
  const __m256i k_bits = _mm256_castpd_si256(k_shifted);
  const __m256d k = _mm256_sub_pd(k_shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, k);  // x·N/ln 2 − k, one rounding
  const __m256i index = _mm256_and_si256(k_bits, _mm256_set1_epi64x(31));  // k mod 32
  const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(t), index, 8);
  const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k_bits, 47)));
  const __m256d c0 = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(c0_bits)));
  const __m256d c1 = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(c1_bits)));
  const __m256d c2 = _mm256_castsi256_pd(_mm256_set1_epi64x(std::int64_t(c2_bits)));
  const __m256d z = _mm256_fmadd_pd(c0, r, c1);
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(c2, r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/// e^v of 8 floats on AVX2: the main path on inputs clamped into its range (a NaN gives
/// `overflow_above`), then the branches' lanes replaced.
CAUSALQWEN_TARGET_AVX2_FMA inline __m256 exp8_avx2(__m256 v, const std::uint64_t* t) {
  const __m256 above = _mm256_set1_ps(overflow_above), zero_under = _mm256_set1_ps(zero_below);
  const __m256 clamped = _mm256_max_ps(_mm256_min_ps(v, above), zero_under);
  __m256 e = _mm256_set_m128(exp4(_mm256_extractf128_ps(clamped, 1), t), exp4(_mm256_castps256_ps128(clamped), t));
  e = _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::denorm_min()),
                       _mm256_cmp_ps(v, _mm256_set1_ps(denorm_min_below), _CMP_LT_OQ));
  e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(v, zero_under, _CMP_LT_OQ));
  e = _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(v, above, _CMP_GT_OQ));
  return _mm256_blendv_ps(e, _mm256_add_ps(v, v), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));  // NaN: x + x
}

/// y[i] = e^{x[i]} for n values, 8 at a time on AVX2 (the last n mod 8 through a buffer of 8).
CAUSALQWEN_TARGET_AVX2_FMA inline void exp_avx2(const float* x, float* y, std::size_t n) {
  const std::uint64_t* t = table();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8_avx2(_mm256_loadu_ps(x + i), t));
  if (i == n) return;
  alignas(32) float tail[8] = {};
  for (std::size_t j = 0; j < n - i; ++j) tail[j] = x[i + j];
  _mm256_store_ps(tail, exp8_avx2(_mm256_load_ps(tail), t));
  for (std::size_t j = 0; j < n - i; ++j) y[i + j] = tail[j];
}
#endif

/// The vector paths: 16 lanes on AVX-512, 8 on AVX2, or none (the scalar loop).
enum class ExpPath { avx512, avx2, scalar };

/// 4,096 inputs over every binade of both signs, with ±0, ±inf, NaN and the branch thresholds
/// and their neighbours: the check a vector path must pass before it is used.
inline bool vector_path_agrees(ExpPath path) {
#ifdef CAUSALQWEN_EXP_KERNEL
  float x[4096];
  std::size_t n = 0;
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            overflow_above, zero_below, denorm_min_below, 88.0f, -88.0f, -87.33654f, -103.5f};
  for (const float s : specials) {
    x[n++] = s;
    x[n++] = std::nextafter(s, 0.0f);
    x[n++] = std::nextafter(s, std::numeric_limits<float>::infinity());
  }
  std::uint32_t state = 12345u;
  while (n < 4096) {
    state = state * 1664525u + 1013904223u;  // bits spread over every exponent and sign
    float v = std::bit_cast<float>(state);
    if (std::isnan(v)) continue;
    if (std::fabs(v) > 120.0f) v = std::fmod(v, 120.0f);
    x[n++] = v;
  }
  float y[4096];
  if (path == ExpPath::avx512)
    exp_avx512(x, y, n);
  else
    exp_avx2(x, y, n);
  for (std::size_t i = 0; i < n; ++i) {
    const float ref = std::exp(x[i]);
    if (std::bit_cast<std::uint32_t>(ref) != std::bit_cast<std::uint32_t>(y[i]) && !(std::isnan(ref) && std::isnan(y[i])))
      return false;
  }
  return true;
#else
  return false;
#endif
}

/// The path that runs here (asked once: CPU features, then the agreement check).
inline ExpPath vector_path() {
#ifdef CAUSALQWEN_EXP_KERNEL
  static const ExpPath path = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma") &&
        vector_path_agrees(ExpPath::avx512))
      return ExpPath::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && vector_path_agrees(ExpPath::avx2))
      return ExpPath::avx2;
    return ExpPath::scalar;
  }();
  return path;
#else
  return ExpPath::scalar;
#endif
}

/// Whether a vector path runs here.
inline bool use_vector_path() { return vector_path() != ExpPath::scalar; }

}  // namespace detail_exp

/// Whether `exp_float` runs 16 (AVX-512) or 8 (AVX2 with FMA) values at a time here, with a C
/// library whose expf it matches, or the scalar loop.
inline bool exp_float_is_vectorised() { return detail_exp::use_vector_path(); }

/// "AVX-512", "AVX2" or "scalar": the path `exp_float` runs on here.
inline const char* exp_float_path() {
  switch (detail_exp::vector_path()) {
    case detail_exp::ExpPath::avx512: return "AVX-512";
    case detail_exp::ExpPath::avx2: return "AVX2";
    default: return "scalar";
  }
}

/// y[i] = e^{x[i]} for i < n, each equal to `std::exp(x[i])` bit for bit (x and y may alias).
inline void exp_float(const float* x, float* y, std::size_t n) {
#ifdef CAUSALQWEN_EXP_KERNEL
  switch (detail_exp::vector_path()) {
    case detail_exp::ExpPath::avx512: return detail_exp::exp_avx512(x, y, n);
    case detail_exp::ExpPath::avx2: return detail_exp::exp_avx2(x, y, n);
    case detail_exp::ExpPath::scalar: break;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

/// Calls f(i0, m, e) for x's chunks [i0, i0 + m) of at most 256 values, with
/// e[i] = e^{arg(x[i0 + i])} from `exp_float` (the exponentials of an elementwise loop, 16 at a
/// time, its other operations left to f).
template <class Arg, class F>
void for_each_exp_chunk(const float* x, std::size_t n, Arg&& arg, F&& f) {
  constexpr std::size_t chunk = 256;
  float e[chunk];
  for (std::size_t i0 = 0; i0 < n; i0 += chunk) {
    const std::size_t m = n - i0 < chunk ? n - i0 : chunk;
    for (std::size_t i = 0; i < m; ++i) e[i] = arg(x[i0 + i]);
    exp_float(e, e, m);
    f(i0, m, static_cast<float*>(e));
  }
}

}  // namespace causalqwen
