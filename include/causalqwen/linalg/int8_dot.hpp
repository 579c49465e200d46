/// The products of decoding with int8 weights (packed_weight.hpp: q_ij ∈ [−127, 127], one scale
/// s_i per row) on integer dot products. The float input x is quantised per chunk c of 16
/// columns (the panels' chunk), as llama.cpp's Q8 activations are per block:
///   t_c = max_{j∈c} |x_j| / 127,   x̂_j = round(x_j / t_c) ∈ [−127, 127]   (ties to even)
///   y_i = s_i · ( (l₀ + l₁) + (l₂ + l₃) ),   l_g = Σ_c t_c · Σ_{k<4} x̂_{16c+4g+k} · q_{i,16c+4g+k}
/// where the inner sums are exact integers and l_g runs over the chunks in order, each step one
/// fused multiply-add (l_g ← fma(float(inner), t_c, l_g)). The scale side of the Cauchy head,
/// Σ_j s_j·|w_ij|, is the same with |q_ij|. Each x̂_j is x_j to within t_c/2, so a product is the
/// float one to within Σ_c (t_c/2)·Σ_{j∈c} |q_ij|·s_i (plus float rounding).
/// On a CPU with AVX512-VNNI (checked at run time) one vpdpbusd multiplies 64 weights (four rows
/// of a panel group × one chunk) by |x̂| with the signs of x̂ moved onto the weights; X is then
/// quantised 16 values at a time with AVX-512, giving the portable loop's bytes. On a CPU with
/// AVX2 and FMA instead, two rows at a time: vpsignb moves x̂'s signs onto the weights, vpmaddubsw
/// sums the products of |x̂| with them in pairs (at most 2·127·127, within int16: no saturation)
/// and vpmaddwd sums the pairs into the four inner sums; X is quantised 8 values at a time with
/// AVX2 there, again the portable loop's bytes. Elsewhere a portable loop computes the
/// same sums in the same order. All three give the same bits. A row's result does
/// not depend on the other rows, the thread count or the CPU. A non-finite x_j makes its chunk's
/// t_c non-finite and the outputs NaN.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernel_choice.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_INT8_KERNEL 1
#endif

namespace causalqwen::linalg {

/// Which kernel the int8 products run: the fastest this CPU has (`automatic`, the default:
/// AVX512-VNNI, else AVX2), the AVX2 one even on a CPU with AVX512-VNNI (`avx2`, for tests and
/// comparisons), or the portable loop everywhere (`portable`: the same bits).
enum class Int8Kernel { automatic, avx2, portable };

/// The instruction set the int8 products run on.
enum class Int8Isa { avx512_vnni, avx2, portable };

namespace detail_int8 {

/// Whether this CPU runs vpdpbusd on 512-bit vectors (asked once).
inline bool cpu_has_avx512_vnni() {
#ifdef CAUSALQWEN_INT8_KERNEL
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

#ifdef CAUSALQWEN_INT8_KERNEL
#define CAUSALQWEN_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

/// One chunk quantised with AVX-512, the same bits as the portable loop in Quantised::assign:
/// the 16 (n ≤ 16 valid) floats at `in` → |x̂| bytes at `mag`, returns the sign bits; t in `t`.
CAUSALQWEN_TARGET_VNNI inline std::uint16_t quantise_chunk_avx512(const float* in, std::size_t n, std::uint8_t* mag, float& t) {
  const __mmask16 valid = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __m512 x = _mm512_maskz_loadu_ps(valid, in);
  const __m512 a = _mm512_abs_ps(x);
  // |x| < ∞ is false for ±∞ and NaN
  const bool finite = _mm512_mask_cmp_ps_mask(valid, a, _mm512_set1_ps(std::numeric_limits<float>::infinity()), _CMP_LT_OQ) == valid;
  const float m = _mm512_reduce_max_ps(a);
  t = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
  if (!(t > 0) || !finite) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mag), _mm_setzero_si128());
    return 0;
  }
  const __m512 q = _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_div_ps(x, _mm512_set1_ps(t)),
                                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                               _mm512_set1_ps(-127.0f)),
                                 _mm512_set1_ps(127.0f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(mag), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_abs_ps(q))));
  return static_cast<std::uint16_t>(_mm512_cmp_ps_mask(q, _mm512_setzero_ps(), _CMP_LT_OQ));
}

#define CAUSALQWEN_TARGET_INT8_AVX2 __attribute__((target("avx2,fma")))

/// x̂ = clamp(round-half-even(x / t), −127, 127) for eight floats (no lambda: GCC compiles a
/// lambda without its enclosing function's target).
CAUSALQWEN_TARGET_INT8_AVX2 inline __m256 quantise8_avx2(__m256 x, float t) {
  const __m256 q = _mm256_round_ps(_mm256_div_ps(x, _mm256_set1_ps(t)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
}

/// One chunk quantised with AVX2, the same bits as the portable loop in Quantised::assign: the
/// 16 (n ≤ 16 valid) floats at `in` → |x̂| bytes at `mag` and x̂ bytes at `value`, returns the
/// sign bits; t in `t`. Eight floats per vector: x / t rounded to nearest even (vroundps), clamped
/// to ±127, then narrowed 32 → 16 → 8 bits with saturation that never binds.
CAUSALQWEN_TARGET_INT8_AVX2 inline std::uint16_t quantise_chunk_avx2(const float* in, std::size_t n, std::uint8_t* mag,
                                                                    std::int8_t* value, float& t) {
  __m256 x_lo, x_hi;  // [8] each, 0 past n
  if (n == 16) {
    x_lo = _mm256_loadu_ps(in);
    x_hi = _mm256_loadu_ps(in + 8);
  } else {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    x_lo = _mm256_maskload_ps(in, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<std::size_t>(n, 8))), index));
    x_hi = _mm256_maskload_ps(in + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n > 8 ? n - 8 : 0)), index));
  }
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 a_lo = _mm256_andnot_ps(sign_bit, x_lo), a_hi = _mm256_andnot_ps(sign_bit, x_hi);
  // |x| < ∞ is false for ±∞ and NaN (lanes past n hold 0)
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const bool finite = (_mm256_movemask_ps(_mm256_cmp_ps(a_lo, inf, _CMP_LT_OQ)) & _mm256_movemask_ps(_mm256_cmp_ps(a_hi, inf, _CMP_LT_OQ))) == 0xFF;
  __m256 m8 = _mm256_max_ps(a_lo, a_hi);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float m = _mm_cvtss_f32(m4);
  t = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
  if (!(t > 0) || !finite) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mag), _mm_setzero_si128());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(value), _mm_setzero_si128());
    return 0;
  }
  const __m256 q_lo = quantise8_avx2(x_lo, t), q_hi = quantise8_avx2(x_hi, t);
  // int32 → int16 (lanes [lo0-3, hi0-3 | lo4-7, hi4-7]), put back in order, → int8
  const __m256i q16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_cvtps_epi32(q_lo), _mm256_cvtps_epi32(q_hi)), _MM_SHUFFLE(3, 1, 2, 0));
  const __m128i q8 = _mm_packs_epi16(_mm256_castsi256_si128(q16), _mm256_extracti128_si256(q16, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(value), q8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(mag), _mm_abs_epi8(q8));
  const __m256 zero8 = _mm256_setzero_ps();
  return static_cast<std::uint16_t>(_mm256_movemask_ps(_mm256_cmp_ps(q_lo, zero8, _CMP_LT_OQ)) |
                                    (_mm256_movemask_ps(_mm256_cmp_ps(q_hi, zero8, _CMP_LT_OQ)) << 8));
}
#endif

/// Vectors quantised per chunk of 16 (the file comment): for vector v and chunk c, the 16 bytes
/// |x̂| at mag[(v·chunks + c)·16], the signs (bit k: x̂_{16c+k} < 0) at sign[v·chunks + c], t_c
/// at scale[v·chunks + c], and (for the AVX2 kernel and the portable loop, not for AVX-512's,
/// which reads mag and sign) x̂ itself at value[(v·chunks + c)·16]. Past the vector's length: 0.
struct Quantised {
  std::vector<std::uint8_t> mag;
  std::vector<std::int8_t> value;
  std::vector<std::uint16_t> sign;
  std::vector<float> scale;
  std::size_t chunks = 0;

  /// Quantises `count` vectors of length K (vector v at x + v·ld) into chunks = ⌈K/16⌉ for the
  /// kernel `isa`: with AVX-512 (`value` then left as it was: that kernel reads mag and sign), with
  /// AVX2, or with the portable loop; the same bits on all three.
  void assign(const float* x, std::size_t ld, std::size_t count, std::size_t K, Int8Isa isa) {
    chunks = (K + panel_cols - 1) / panel_cols;
    const bool with_values = isa != Int8Isa::avx512_vnni;
    if (mag.size() < count * chunks * panel_cols) mag.resize(count * chunks * panel_cols);
    if (with_values && value.size() < count * chunks * panel_cols) value.resize(count * chunks * panel_cols);
    if (sign.size() < count * chunks) sign.resize(count * chunks);
    if (scale.size() < count * chunks) scale.resize(count * chunks);
    for (std::size_t v = 0; v < count; ++v)
      for (std::size_t c = 0; c < chunks; ++c) {
        const float* in = x + v * ld + c * panel_cols;
        const std::size_t n = std::min(panel_cols, K - c * panel_cols), at = v * chunks + c;
#ifdef CAUSALQWEN_INT8_KERNEL
        if (isa == Int8Isa::avx512_vnni) {
          sign[at] = quantise_chunk_avx512(in, n, mag.data() + at * panel_cols, scale[at]);
          continue;
        }
        if (isa == Int8Isa::avx2) {
          sign[at] = quantise_chunk_avx2(in, n, mag.data() + at * panel_cols, value.data() + at * panel_cols, scale[at]);
          continue;
        }
#endif
        float m = 0;
        bool finite = true;
        for (std::size_t k = 0; k < n; ++k) {
          finite = finite && std::isfinite(in[k]);
          m = std::max(m, std::fabs(in[k]));
        }
        const float t = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
        scale[at] = t;
        std::uint16_t bits = 0;
        for (std::size_t k = 0; k < panel_cols; ++k) {
          float q = 0;
          if (k < n && t > 0 && finite) q = std::clamp(std::nearbyint(in[k] / t), -127.0f, 127.0f);
          mag[at * panel_cols + k] = static_cast<std::uint8_t>(std::fabs(q));
          if (q < 0) bits = static_cast<std::uint16_t>(bits | (1u << k));
        }
        sign[at] = bits;
        set_values(at);
      }
  }
  /// value ← ±mag with the signs, for chunk `at`.
  void set_values(std::size_t at) {
    for (std::size_t k = 0; k < panel_cols; ++k) {
      const auto m = static_cast<std::int8_t>(mag[at * panel_cols + k]);
      value[at * panel_cols + k] = (sign[at] >> k) & 1u ? static_cast<std::int8_t>(-m) : m;
    }
  }
  const std::uint8_t* mag_of(std::size_t v) const { return mag.data() + v * chunks * panel_cols; }
  /// x̂ of vector v (meaningful after a quantisation off AVX-512 only), or null when `value` is
  /// shorter (AVX-512's quantisation stores none).
  const std::int8_t* value_of(std::size_t v) const {
    return value.size() >= (v + 1) * chunks * panel_cols ? value.data() + v * chunks * panel_cols : nullptr;
  }
  const std::uint16_t* sign_of(std::size_t v) const { return sign.data() + v * chunks; }
  const float* scale_of(std::size_t v) const { return scale.data() + v * chunks; }
};

/// One quantised vector as the kernels read it. `nonnegative`: the caller knows every x̂ ≥ 0 (a
/// Cauchy scale), so that the AVX2 kernel may skip its sign step (the same products).
struct QuantisedRef {
  const std::uint8_t* mag;
  const std::int8_t* value;
  const std::uint16_t* sign;
  const float* scale;
  bool nonnegative = false;
};
inline QuantisedRef ref(const Quantised& q, std::size_t v) { return {q.mag_of(v), q.value_of(v), q.sign_of(v), q.scale_of(v)}; }

/// y = ((l₀ + l₁) + (l₂ + l₃)): a row's four lane sums, in the kernels' order.
inline float lane_sum(const float* l) { return (l[0] + l[1]) + (l[2] + l[3]); }

/// The portable kernel: the sum (without the row scale) of row r of the store (any row) with x,
/// reading q_rj (or |q_rj| when `absolute`), in the order of the file comment.
inline float row_sum_portable(const std::int8_t* store, std::size_t cols_padded, std::size_t r, std::size_t chunks,
                              const QuantisedRef& x, bool absolute) {
  float l[4] = {0, 0, 0, 0};
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::int8_t* w = store + panel_index(r, c * panel_cols, cols_padded);
    const std::uint8_t* m = x.mag + c * panel_cols;
    for (std::size_t g = 0; g < 4; ++g) {
      std::int32_t inner = 0;
      for (std::size_t k = 4 * g; k < 4 * g + 4; ++k) {
        const std::int32_t q = absolute ? std::abs(std::int32_t(w[k])) : std::int32_t(w[k]);
        const std::int32_t signed_mag = (x.sign[c] >> k) & 1u ? -std::int32_t(m[k]) : std::int32_t(m[k]);
        inner += signed_mag * q;
      }
      l[g] = std::fma(static_cast<float>(inner), x.scale[c], l[g]);
    }
  }
  return lane_sum(l);
}

#ifdef CAUSALQWEN_INT8_KERNEL
/// The lane sums l_g of the four rows of one panel group (lane 4r + g), for x (and, when `s` is
/// given, for s with |q|: the scale side), accumulated over the chunks.
template <bool WithScale>
CAUSALQWEN_TARGET_VNNI inline void group_lanes_avx512(const std::int8_t* group, std::size_t chunks, const QuantisedRef& x,
                                                      const QuantisedRef* s, float* lanes_x, float* lanes_s) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc_x = _mm512_setzero_ps(), acc_s = _mm512_setzero_ps();
  for (std::size_t c = 0; c < chunks; ++c) {
    const __m512i w = _mm512_loadu_si512(group + c * panel_rows * panel_cols);  // rows 0-3 × 16 columns
    // bit 16r + k of the mask: x̂_{16c+k} < 0, for each of the four rows
    const __mmask64 neg_x = _cvtu64_mask64(std::uint64_t(x.sign[c]) * 0x0001000100010001ull);
    const __m512i wx = _mm512_mask_sub_epi8(w, neg_x, zero, w);
    const __m512i mx = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.mag + c * panel_cols)));
    acc_x = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, mx, wx)), _mm512_set1_ps(x.scale[c]), acc_x);
    if constexpr (WithScale) {
      const __m512i a = _mm512_abs_epi8(w);
      const __mmask64 neg_s = _cvtu64_mask64(std::uint64_t(s->sign[c]) * 0x0001000100010001ull);
      const __m512i ws = _mm512_mask_sub_epi8(a, neg_s, zero, a);
      const __m512i ms = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s->mag + c * panel_cols)));
      acc_s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, ms, ws)), _mm512_set1_ps(s->scale[c]), acc_s);
    }
  }
  _mm512_storeu_ps(lanes_x, acc_x);
  if constexpr (WithScale) _mm512_storeu_ps(lanes_s, acc_s);
}

/// t_c·(the four inner sums of two rows × one chunk), added to acc (lane 4r + g: row r of the
/// two, group g of four columns): w holds the two rows' 16 weights each (|q| when `absolute`),
/// x the chunk's x̂ and |x̂| in both 128-bit halves. `NonNegative` (every x̂ ≥ 0): ±q is q wherever
/// |x̂| is not 0, so the sign step is skipped and `value` is not read: the same pair sums, with 2
/// of the Cauchy head's 22 vector operations per chunk fewer, which matters because on AVX2 that
/// head is bound by its arithmetic rather than by reading W_cls.
template <bool Absolute, bool NonNegative = false>
CAUSALQWEN_TARGET_INT8_AVX2 inline __m256 two_rows_avx2(__m256i w, __m256i value, __m256i mag, float t, __m256 acc) {
  const __m256i q = Absolute ? _mm256_abs_epi8(w) : w;
  const __m256i pairs = _mm256_maddubs_epi16(mag, NonNegative ? q : _mm256_sign_epi8(q, value));  // |x̂|·(±q), summed in pairs
  const __m256i inner = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));            // and in fours
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(inner), _mm256_set1_ps(t), acc);
}

/// The 16 bytes at p in both 128-bit halves.
CAUSALQWEN_TARGET_INT8_AVX2 inline __m256i both_halves(const void* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

/// group_lanes_avx512 on AVX2: the same lanes, two rows per 256-bit vector. W is read as one
/// sequential stream with no software prefetch: asking for its lines ahead (prefetchnta) slowed
/// the layers' pass from memory, and the hardware prefetcher follows the one stream.
template <bool WithScale, bool ScaleNonNegative = false>
CAUSALQWEN_TARGET_INT8_AVX2 inline void group_lanes_avx2(const std::int8_t* group, std::size_t chunks, const QuantisedRef& x,
                                                         const QuantisedRef* s, float* lanes_x, float* lanes_s) {
  __m256 acc_x01 = _mm256_setzero_ps(), acc_x23 = _mm256_setzero_ps(), acc_s01 = _mm256_setzero_ps(), acc_s23 = _mm256_setzero_ps();
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::int8_t* w = group + c * panel_rows * panel_cols;
    const __m256i w01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));  // rows 0, 1 × 16 columns
    const __m256i w23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * panel_cols));
    const __m256i xv = both_halves(x.value + c * panel_cols), xm = both_halves(x.mag + c * panel_cols);
    acc_x01 = two_rows_avx2<false>(w01, xv, xm, x.scale[c], acc_x01);
    acc_x23 = two_rows_avx2<false>(w23, xv, xm, x.scale[c], acc_x23);
    if constexpr (WithScale) {
      const __m256i sm = both_halves(s->mag + c * panel_cols);
      const __m256i sv = ScaleNonNegative ? sm : both_halves(s->value + c * panel_cols);
      acc_s01 = two_rows_avx2<true, ScaleNonNegative>(w01, sv, sm, s->scale[c], acc_s01);
      acc_s23 = two_rows_avx2<true, ScaleNonNegative>(w23, sv, sm, s->scale[c], acc_s23);
    }
  }
  _mm256_storeu_ps(lanes_x, acc_x01);
  _mm256_storeu_ps(lanes_x + 8, acc_x23);
  if constexpr (WithScale) {
    _mm256_storeu_ps(lanes_s, acc_s01);
    _mm256_storeu_ps(lanes_s + 8, acc_s23);
  }
}
#endif

/// For rows [n0, n0 + count) (count ≤ 4) of the packed W, against x and (when s is non-null) s:
/// out_x[i] = s_i·Σ x̂·q, out_s[i] = s_i·Σ ŝ·|q|; on the instruction set `isa` when the rows are
/// one whole panel group, else on the portable loop (the same bits).
inline void rows4(Int8Isa isa, const PackedRef& w, std::size_t n0, std::size_t count, const QuantisedRef& x,
                  const QuantisedRef* s, float* out_x, float* out_s) {
  const std::size_t chunks = w.cols_padded / panel_cols, r0 = w.row0 + n0;
#ifdef CAUSALQWEN_INT8_KERNEL
  if (isa != Int8Isa::portable && r0 % panel_rows == 0) {
    const std::int8_t* group = w.q + panel_index(r0, 0, w.cols_padded);
    alignas(64) float lanes_x[16], lanes_s[16];
    if (isa == Int8Isa::avx2) {
      if (s && s->nonnegative) group_lanes_avx2<true, true>(group, chunks, x, s, lanes_x, lanes_s);
      else if (s) group_lanes_avx2<true>(group, chunks, x, s, lanes_x, lanes_s);
      else group_lanes_avx2<false>(group, chunks, x, nullptr, lanes_x, nullptr);
    } else if (s) {
      group_lanes_avx512<true>(group, chunks, x, s, lanes_x, lanes_s);
    } else {
      group_lanes_avx512<false>(group, chunks, x, nullptr, lanes_x, nullptr);
    }
    for (std::size_t i = 0; i < count; ++i) {
      out_x[i] = lane_sum(lanes_x + 4 * i) * w.row_scale[r0 + i];
      if (s) out_s[i] = lane_sum(lanes_s + 4 * i) * w.row_scale[r0 + i];
    }
    return;
  }
#endif
  for (std::size_t i = 0; i < count; ++i) {
    out_x[i] = row_sum_portable(w.q, w.cols_padded, r0 + i, chunks, x, false) * w.row_scale[r0 + i];
    if (s) out_s[i] = row_sum_portable(w.q, w.cols_padded, r0 + i, chunks, *s, true) * w.row_scale[r0 + i];
  }
}

}  // namespace detail_int8

/// Sets the kernel of every later int8 product in this process.
inline void set_int8_kernel(Int8Kernel k) { kernel_choice<Int8Kernel>() = k; }

/// The instruction set the int8 products run on now.
inline Int8Isa int8_kernel_isa() { return kernel_isa<Int8Kernel>(detail_int8::cpu_has_avx512_vnni(), Int8Isa::avx512_vnni); }

/// Whether the int8 products run one of their instruction-set kernels now (AVX512-VNNI or AVX2).
inline bool int8_kernel_is_hardware() { return int8_kernel_isa() != Int8Isa::portable; }

/// "AVX512-VNNI", "AVX2" or "portable": what the int8 products run on now.
inline const char* int8_kernel_name() {
  switch (int8_kernel_isa()) {
    case Int8Isa::avx512_vnni: return "AVX512-VNNI";
    case Int8Isa::avx2: return "AVX2";
    default: return "portable";
  }
}

/// Y = x̂·Wᵀ (+ b) with W an int8 copy, X [M,K] quantised per row and chunk (the file comment),
/// Y [M,N]; rows of W split over the threads in blocks of 64.
inline void int8_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                TensorView<const float, 1> b = {}) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows;
  detail::require(w.type == Format::int8, "int8_linear_forward", "W is {}, not an int8 copy", format_name(w.type));
  detail::require(w.cols == K, "int8_linear_forward", "W [{},{}] does not match X {}", N, w.cols, shape_text(x.shape));
  require_shape(y, {M, N}, "int8_linear_forward", "Y");
  if (!b.empty()) require_shape(b, {N}, "int8_linear_forward", "b");
  thread_local detail_int8::Quantised quantised;  // grown once per shape
  const detail_int8::Quantised& xq = quantised;  // the caller's: the workers' thread_local would be their own
  const Int8Isa isa = int8_kernel_isa();
  quantised.assign(x.data, K, M, K, isa);
  constexpr std::size_t rows_per_task = 64;
  parallel_for((N + rows_per_task - 1) / rows_per_task, M * N * K / 4 + N * K, [&](std::size_t t) {
    const std::size_t n1 = std::min(N, (t + 1) * rows_per_task);
    float out[4];
    for (std::size_t n = t * rows_per_task; n < n1; n += panel_rows) {
      const std::size_t count = std::min(panel_rows, n1 - n);
      for (std::size_t m = 0; m < M; ++m) {
        const auto xr = detail_int8::ref(xq, m);
        detail_int8::rows4(isa, w, n, count, xr, nullptr, out, nullptr);
        for (std::size_t i = 0; i < count; ++i) y.data[m * N + n + i] = out[i] + (b.empty() ? 0.0f : b.data[n + i]);
      }
    }
  });
}

/// The fused Cauchy product of decoding with an int8 W [N,C]: for each of the R rows,
/// loc[r,n] = s_n·Σ â·q_n + b_n and (scale non-null) scale[r,n] = s_n·Σ ŝ·|q_n|, with a and s
/// quantised per chunk (the file comment); W is read once for all R rows and both sums.
inline void int8_cauchy_rows(const PackedRef& w, const float* loc_a, const float* scale_a, std::size_t R, std::size_t C,
                             const float* bias, float* loc, float* scale) {
  detail::require(w.type == Format::int8 && w.cols == C, "int8_cauchy_rows", "W is not an int8 copy with {} columns", C);
  const std::size_t N = w.rows;
  thread_local detail_int8::Quantised quantised_loc, quantised_scale;
  const detail_int8::Quantised &aq = quantised_loc, &sq = quantised_scale;  // the caller's, for the workers
  const Int8Isa isa = int8_kernel_isa();
  quantised_loc.assign(loc_a, C, R, C, isa);
  if (scale_a) quantised_scale.assign(scale_a, C, R, C, isa);
  // a Cauchy scale has no negative value, and then the AVX2 kernel skips a sign step
  const bool scale_nonnegative =
      scale_a && std::all_of(sq.sign.begin(), sq.sign.begin() + static_cast<std::ptrdiff_t>(R * sq.chunks),
                             [](std::uint16_t bits) { return bits == 0; });
  constexpr std::size_t rows_per_task = 256;
  parallel_for((N + rows_per_task - 1) / rows_per_task, N * C, [&](std::size_t t) {
    const std::size_t n1 = std::min(N, (t + 1) * rows_per_task);
    float l[4], s[4];
    for (std::size_t n = t * rows_per_task; n < n1; n += panel_rows) {
      const std::size_t count = std::min(panel_rows, n1 - n);
      for (std::size_t r = 0; r < R; ++r) {
        const auto ar = detail_int8::ref(aq, r);
        auto sr = scale_a ? detail_int8::ref(sq, r) : detail_int8::QuantisedRef{};
        sr.nonnegative = scale_nonnegative;
        detail_int8::rows4(isa, w, n, count, ar, scale_a ? &sr : nullptr, l, s);
        for (std::size_t i = 0; i < count; ++i) {
          loc[r * N + n + i] = l[i] + (bias ? bias[n + i] : 0.0f);
          if (scale) scale[r * N + n + i] = s[i];
        }
      }
    }
  });
}

}  // namespace causalqwen::linalg
