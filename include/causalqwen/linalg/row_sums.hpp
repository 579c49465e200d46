/// Sums of many rows, each taken in index order:
///   sums_r = (((0 + x_r0) + x_r1) + …) + x_r,len_r−1
/// the bits of the scalar loop, whatever the CPU. A single such sum is a chain of dependent
/// additions (one per 3–4 cycles); sixteen rows side by side, one row per lane of an AVX-512
/// register, run sixteen chains at once: each 16×16 block of the rows is transposed in
/// registers, and its columns are added in order, a lane left out once its row has ended.
/// (Attention's softmax sums its rows so: a 4,096-token prompt has 58 million terms per head
/// group and layer.)
#pragma once
#include "causalqwen/linalg/transpose16.hpp"

#include <algorithm>
#include <cstddef>

namespace causalqwen::linalg {

namespace detail_row_sums {

/// The portable loop: each row's sum in index order.
inline void portable(const float* x, std::size_t ld, std::size_t rows, const std::size_t* lengths, float* sums) {
  for (std::size_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (std::size_t j = 0; j < lengths[r]; ++j) sum += x[r * ld + j];
    sums[r] = sum;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
/// Rows [0, count) (count ≤ 16) of x, one per lane: lane r adds x_rj for j < len_r, in order.
__attribute__((target("avx512f"))) inline void sixteen_rows(const float* x, std::size_t ld, std::size_t count,
                                                           const std::size_t* lengths, float* sums) {
  alignas(64) float len_f[16] = {};  // lengths as floats are exact below 2^24; compared with the column
  std::size_t longest = 0;
  for (std::size_t r = 0; r < count; ++r) {
    len_f[r] = static_cast<float>(lengths[r]);
    longest = std::max(longest, lengths[r]);
  }
  const __m512 len = _mm512_load_ps(len_f);
  __m512 acc = _mm512_setzero_ps();
  __m512 block[16];
  for (std::size_t j0 = 0; j0 < longest; j0 += 16) {
    const std::size_t width = std::min<std::size_t>(16, longest - j0);
    const __mmask16 cols = width == 16 ? __mmask16(0xFFFF) : __mmask16((1u << width) - 1);
    for (std::size_t r = 0; r < 16; ++r)
      block[r] = r < count && j0 < lengths[r] ? _mm512_maskz_loadu_ps(cols, x + r * ld + j0) : _mm512_setzero_ps();
    transpose16(block);  // block[t] lane r = x_r,j0+t
    for (std::size_t t = 0; t < width; ++t) {
      const __mmask16 live = _mm512_cmp_ps_mask(_mm512_set1_ps(static_cast<float>(j0 + t)), len, _CMP_LT_OQ);
      acc = _mm512_mask_add_ps(acc, live, acc, block[t]);
    }
  }
  alignas(64) float out[16];
  _mm512_store_ps(out, acc);
  std::copy_n(out, count, sums);
}
#endif

}  // namespace detail_row_sums

/// sums[r] = Σ_{j < lengths[r]} x[r·ld + j] for r ∈ [0, rows), each sum in index order starting
/// from +0 (the file comment); 16 rows at a time on AVX-512, else the scalar loop (the same bits).
/// Lengths must stay below 2^24.
inline void ordered_row_sums(const float* x, std::size_t ld, std::size_t rows, const std::size_t* lengths, float* sums) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu_has_avx512f()) {
    for (std::size_t r0 = 0; r0 < rows; r0 += 16)
      detail_row_sums::sixteen_rows(x + r0 * ld, ld, std::min<std::size_t>(16, rows - r0), lengths + r0, sums + r0);
    return;
  }
#endif
  detail_row_sums::portable(x, ld, rows, lengths, sums);
}

}  // namespace causalqwen::linalg
