/// The operands of the bf16 outer-product kernels (kernels/bf16_outer_tiles.hpp), rounded to
/// bf16: pairs of rows (2p, 2p+1) side by side in 32-bit words, for AVX512-BF16's kernel and the
/// portable loop, or split into two float rows per pair (the odd row first) for AVX2's; made
/// from floats or from a bf16 copy in panels, on AVX-512, AVX2 or the portable loop (the same
/// bits).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_vectors.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace causalqwen::linalg::detail_bf16 {

/// pairs [P, ld_pairs] (P = ⌈K/2⌉, 32-bit words) ← bf16 of src's rows 2p and 2p+1 side by side
/// (low half: row 2p), for columns [0, cols) of src [K, cols] (leading dimension ld); a missing
/// row 2p+1 (odd K) and the columns [cols, ld_pairs) are 0.
inline void pair_row_portable(const float* src, std::size_t ld, std::size_t K, std::size_t cols, std::size_t ld_pairs,
                              std::size_t p, std::uint32_t* pairs) {
  for (std::size_t c = 0; c < ld_pairs; ++c) {
    const std::uint32_t lo = c < cols ? float_to_bf16(src[2 * p * ld + c]) : 0;
    const std::uint32_t hi = c < cols && 2 * p + 1 < K ? float_to_bf16(src[(2 * p + 1) * ld + c]) : 0;
    pairs[p * ld_pairs + c] = lo | hi << 16;
  }
}
inline void pair_rows_portable(const float* src, std::size_t ld, std::size_t K, std::size_t cols, std::size_t ld_pairs,
                               std::uint32_t* pairs) {
  parallel_for((K + 1) / 2, K * cols, [&](std::size_t p) { pair_row_portable(src, ld, K, cols, ld_pairs, p, pairs); });
}
/// pair_row_portable's pair p from a bf16 copy of src [K, ·] in panels (panel_index, Kp columns):
/// rows k0 + 2p and k0 + 2p + 1 (0 past K), columns [j0, j0 + cols) (0 past cols, up to
/// ld_pairs); `abs`: the values with their sign bits cleared (|src|).
inline void pair_panel_row_portable(const std::uint16_t* panels, std::size_t Kp, std::size_t K, std::size_t k0, std::size_t j0,
                                    std::size_t cols, std::size_t ld_pairs, std::size_t p, std::uint32_t* pairs, bool abs) {
  const std::uint32_t value_bits = abs ? 0x7FFFu : 0xFFFFu;
  for (std::size_t c = 0; c < ld_pairs; ++c) {
    const std::size_t lo_row = k0 + 2 * p, hi_row = lo_row + 1;
    const std::uint32_t lo = c < cols ? panels[panel_index(lo_row, j0 + c, Kp)] & value_bits : 0;
    const std::uint32_t hi = c < cols && hi_row < K ? panels[panel_index(hi_row, j0 + c, Kp)] & value_bits : 0;
    pairs[p * ld_pairs + c] = lo | hi << 16;
  }
}

/// words [M, ld_words] ← the pairs of A's columns: word p of row m is bf16(A_m,2p) (low half) and
/// bf16(A_m,2p+1) (high half) for A [M, K] (leading dimension lda); past K, 0. (The bf16 row in
/// memory order, read as 32-bit words.)
inline void pair_columns_portable(const float* a, std::size_t lda, std::size_t M, std::size_t K, std::size_t ld_words,
                                  std::uint32_t* words) {
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t p = 0; p < ld_words; ++p) {
      const std::uint32_t lo = 2 * p < K ? float_to_bf16(a[m * lda + 2 * p]) : 0;
      const std::uint32_t hi = 2 * p + 1 < K ? float_to_bf16(a[m * lda + 2 * p + 1]) : 0;
      words[m * ld_words + p] = lo | hi << 16;
    }
}

#ifdef CAUSALQWEN_BF16_KERNEL
/// pair_rows_portable with AVX-512 (the same bits), 16 columns at a time.
CAUSALQWEN_TARGET_BF16 inline void pair_row_avx512(const float* src, std::size_t ld, std::size_t K, std::size_t cols,
                                                   std::size_t ld_pairs, std::size_t p, std::uint32_t* pairs) {
  for (std::size_t c = 0; c < ld_pairs; c += 16) {
    const __mmask16 valid = c < cols ? first_lanes(cols - c) : __mmask16(0);
    const __m512 lo = _mm512_maskz_loadu_ps(valid, src + 2 * p * ld + c);
    const __m512 hi = 2 * p + 1 < K ? _mm512_maskz_loadu_ps(valid, src + (2 * p + 1) * ld + c) : _mm512_setzero_ps();
    if (any_subnormal(lo) || any_subnormal(hi)) [[unlikely]] {
      const __m512i lo16 = _mm512_cvtepu16_epi32(round16_integer(lo)), hi16 = _mm512_cvtepu16_epi32(round16_integer(hi));
      _mm512_storeu_si512(pairs + p * ld_pairs + c, _mm512_or_si512(lo16, _mm512_slli_epi32(hi16, 16)));
      continue;
    }
    // vcvtne2ps2bf16 puts bf16(lo) in words [0, 16) and bf16(hi) in [16, 32); vpermw interleaves them
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                                20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_si512(pairs + p * ld_pairs + c, _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
  }
}
/// pair_row_avx512's pair p from a bf16 copy of src in panels (panel_index, Kp columns) instead of
/// the floats: rows k0 + 2p and k0 + 2p + 1 (k0 even), columns [j0, j0 + cols) (j0 a multiple of
/// 16). The copy holds the same bf16 values, so the pairs have the same bits; the two rows of a
/// pair lie side by side in their panel (16 values each), and vpermw interleaves them. `abs`:
/// the pairs of |src|, the copy's values with their sign bits cleared; `second` false: row
/// k0 + 2p + 1 lies past B (odd K) and counts as 0, whatever the panels hold there.
CAUSALQWEN_TARGET_BF16 inline void pair_panel_row_avx512(const std::uint16_t* panels, std::size_t Kp, std::size_t k0, std::size_t j0,
                                                         std::size_t cols, std::size_t ld_pairs, std::size_t p,
                                                         std::uint32_t* pairs, bool abs, bool second) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                              20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const short value_bits = static_cast<short>(abs ? 0x7FFF : 0xFFFF);
  const __m512i keep = _mm512_inserti64x4(_mm512_set1_epi16(value_bits), _mm256_set1_epi16(second ? value_bits : short{0}), 1);
  for (std::size_t c = 0; c < ld_pairs; c += 16) {
    const __m512i two_rows =
        c < cols ? _mm512_and_si512(keep, _mm512_loadu_si512(panels + panel_index(k0 + 2 * p, j0 + c, Kp))) : _mm512_setzero_si512();
    _mm512_storeu_si512(pairs + p * ld_pairs + c, _mm512_permutexvar_epi16(interleave, two_rows));
  }
}

/// pair_columns_portable with AVX-512 (the same bits), 16 words (32 columns) at a time.
CAUSALQWEN_TARGET_BF16 inline void pair_columns_avx512(const float* a, std::size_t lda, std::size_t M, std::size_t K,
                                                       std::size_t ld_words, std::uint32_t* words) {
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t k = 0; k < 2 * ld_words; k += 32) {
      const __mmask16 low = k < K ? first_lanes(K - k) : __mmask16(0);
      const __mmask16 high = k + 16 < K ? first_lanes(K - k - 16) : __mmask16(0);
      const __m256i lo = round16(_mm512_maskz_loadu_ps(low, a + m * lda + k));
      const __m256i hi = round16(_mm512_maskz_loadu_ps(high, a + m * lda + k + 16));
      _mm512_storeu_si512(words + m * ld_words + k / 2, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
}
#endif

/// pair_row_portable, on AVX-512 when `hardware`.
inline void pair_row(bool hardware, const float* src, std::size_t ld, std::size_t K, std::size_t cols, std::size_t ld_pairs,
                     std::size_t p, std::uint32_t* pairs) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (hardware) return pair_row_avx512(src, ld, K, cols, ld_pairs, p, pairs);
#endif
  pair_row_portable(src, ld, K, cols, ld_pairs, p, pairs);
}

/// pair_columns_portable, on AVX-512 when `hardware`.
inline void pair_columns(bool hardware, const float* a, std::size_t lda, std::size_t M, std::size_t K, std::size_t ld_words,
                         std::uint32_t* words) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (hardware) return pair_columns_avx512(a, lda, M, K, ld_words, words);
#endif
  pair_columns_portable(a, lda, M, K, ld_words, words);
}

#ifdef CAUSALQWEN_BF16_KERNEL
/// pair_row_portable's pair p split for the AVX2 kernel: rows[2p] ← bf16 of src's row 2p+1 and
/// rows[2p+1] ← bf16 of row 2p, as floats, columns [0, cols) (ld_rows per row; 0 past cols, and
/// for a row 2p+1 past K).
CAUSALQWEN_TARGET_AVX2 inline void split_row_avx2(const float* src, std::size_t ld, std::size_t K, std::size_t cols,
                                                  std::size_t ld_rows, std::size_t p, float* rows) {
  for (std::size_t half = 0; half < 2; ++half) {
    const std::size_t k = 2 * p + 1 - half;  // the odd row first
    float* out = rows + (2 * p + half) * ld_rows;
    for (std::size_t c = 0; c < ld_rows; c += 8)
      _mm256_storeu_ps(out + c, rounded8_avx2(src + k * ld + c, k < K && c < cols ? cols - c : 0));
  }
}

/// split_row_avx2's pair p from a bf16 copy of src in panels (panel_index, Kp columns), as
/// pair_panel_row_portable reads it: rows k0 + 2p + 1 and k0 + 2p (0 past K), columns
/// [j0, j0 + cols) (j0 a multiple of 16; 0 past cols, up to ld_rows); `abs`: |src|.
CAUSALQWEN_TARGET_AVX2 inline void split_panel_row_avx2(const std::uint16_t* panels, std::size_t Kp, std::size_t K, std::size_t k0,
                                                        std::size_t j0, std::size_t cols, std::size_t ld_rows, std::size_t p,
                                                        float* rows, bool abs) {
  const __m128i value_bits = _mm_set1_epi16(static_cast<short>(abs ? 0x7FFF : 0xFFFF));
  for (std::size_t half = 0; half < 2; ++half) {
    const std::size_t k = k0 + 2 * p + 1 - half;
    float* out = rows + (2 * p + half) * ld_rows;
    for (std::size_t c = 0; c < ld_rows; c += 8)  // the panel pads the columns to 16 with zeros
      _mm256_storeu_ps(out + c, k < K && c < cols ? widen8_avx2(panels + panel_index(k, j0 + c, Kp), value_bits)
                                                  : _mm256_setzero_ps());
  }
}

/// pair_columns_portable split for the AVX2 kernel: row m of `rows` [M, ld_rows] holds, at
/// 2p and 2p+1, bf16(A_m,2p+1) and bf16(A_m,2p) as floats (0 past K, up to ld_rows, even).
CAUSALQWEN_TARGET_AVX2 inline void split_columns_avx2(const float* a, std::size_t lda, std::size_t M, std::size_t K,
                                                      std::size_t ld_rows, float* rows) {
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t k = 0; k < ld_rows; k += 8) {
      const __m256 rounded = rounded8_avx2(a + m * lda + k, k < K ? K - k : 0);
      _mm256_storeu_ps(rows + m * ld_rows + k, _mm256_permute_ps(rounded, _MM_SHUFFLE(2, 3, 0, 1)));  // each pair swapped
    }
}
#endif

/// pair_row_portable's pair p on `isa`'s packer, into pairs or split pairs (Word = float: AVX2).
template <class Word>
void pair_row_on([[maybe_unused]] Bf16Isa isa, const float* src, std::size_t ld, std::size_t K, std::size_t cols, std::size_t ld_out,
                 std::size_t p, Word* out) {
  if constexpr (std::is_same_v<Word, float>) {
#ifdef CAUSALQWEN_BF16_KERNEL
    split_row_avx2(src, ld, K, cols, ld_out, p, out);
#endif
  } else {
    pair_row(isa == Bf16Isa::avx512_bf16, src, ld, K, cols, ld_out, p, out);
  }
}
/// pair_rows_portable on `isa`'s packer, into pairs or split pairs (Word = float: AVX2).
template <class Word>
void pair_rows_on(Bf16Isa isa, const float* src, std::size_t ld, std::size_t K, std::size_t cols, std::size_t ld_out, Word* out) {
  parallel_for((K + 1) / 2, K * cols, [&](std::size_t p) { pair_row_on(isa, src, ld, K, cols, ld_out, p, out); });
}
/// pair_panel_row_portable's pair p on `isa`'s packer, into pairs or split pairs (Word = float:
/// AVX2); k0 even.
template <class Word>
void pair_panel_row_on([[maybe_unused]] Bf16Isa isa, const std::uint16_t* panels, std::size_t Kp, std::size_t K, std::size_t k0, std::size_t j0,
                       std::size_t cols, std::size_t ld_out, std::size_t p, Word* out, bool abs) {
  if constexpr (std::is_same_v<Word, float>) {
#ifdef CAUSALQWEN_BF16_KERNEL
    split_panel_row_avx2(panels, Kp, K, k0, j0, cols, ld_out, p, out, abs);
#endif
  } else {
#ifdef CAUSALQWEN_BF16_KERNEL
    if (isa == Bf16Isa::avx512_bf16)
      return pair_panel_row_avx512(panels, Kp, k0, j0, cols, ld_out, p, out, abs, k0 + 2 * p + 1 < K);
#endif
    pair_panel_row_portable(panels, Kp, K, k0, j0, cols, ld_out, p, out, abs);
  }
}
/// pair_columns_portable on `isa`'s packer, into pairs or split pairs (Word = float: AVX2), ld_out
/// words per row.
template <class Word>
void pair_columns_on([[maybe_unused]] Bf16Isa isa, const float* a, std::size_t lda, std::size_t M, std::size_t K, std::size_t ld_out, Word* out) {
  if constexpr (std::is_same_v<Word, float>) {
#ifdef CAUSALQWEN_BF16_KERNEL
    split_columns_avx2(a, lda, M, K, ld_out, out);
#endif
  } else {
    pair_columns(isa == Bf16Isa::avx512_bf16, a, lda, M, K, ld_out, out);
  }
}

}  // namespace causalqwen::linalg::detail_bf16
