/// The AVX512-BF16 micro-kernel of the bf16 rows product (tile_avx512: vdpbf16ps over rows of
/// bf16 X and panel groups of 4 W rows; the bits of tile_portable). Defined where
/// CAUSALQWEN_BF16_KERNEL is (kernels/bf16_cpu.hpp).
#pragma once
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles_portable.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <cstddef>
#include <cstdint>

#ifdef CAUSALQWEN_BF16_KERNEL
namespace causalqwen::linalg::detail_bf16 {

/// Four row sums from the lane accumulators of rows (0,1) and (2,3): [y₀, y₁, y₂, y₃].
CAUSALQWEN_TARGET_BF16 inline __m128 four_sums(__m512 rows01, __m512 rows23) {
  // 128-bit blocks: rows01 = [r0 l0-3, r0 l4-7, r1 l0-3, r1 l4-7], rows23 likewise
  const __m512 low = _mm512_shuffle_f32x4(rows01, rows23, _MM_SHUFFLE(2, 0, 2, 0));   // l0-3 of r0..r3
  const __m512 high = _mm512_shuffle_f32x4(rows01, rows23, _MM_SHUFFLE(3, 1, 3, 1));  // l4-7 of r0..r3
  const __m512 s4 = _mm512_add_ps(low, high);                                          // l_j + l_{j+4}
  const __m512 s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, _MM_SHUFFLE(1, 0, 3, 2)));  // (j, j+2)
  const __m512 s1 = _mm512_add_ps(s2, _mm512_permute_ps(s2, _MM_SHUFFLE(2, 3, 0, 1)));  // (0, 1)
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s1));
}

/// The AVX512-BF16 kernel: MR rows of xb × G groups of 4 W rows, stored straight into C
/// (four sums per vector store; the same bits as tile_portable's scalar stores).
template <std::size_t MR, std::size_t G>
CAUSALQWEN_TARGET_BF16 void tile_avx512(const std::uint16_t* xb, std::size_t Kp, const std::uint16_t* w_group, const TileOut& o) {
  const std::size_t chunks = Kp / panel_cols, group_stride = panel_rows * Kp;
  __m512 acc[MR][2 * G];
  for (std::size_t m = 0; m < MR; ++m)
    for (std::size_t q = 0; q < 2 * G; ++q) acc[m][q] = _mm512_setzero_ps();
  for (std::size_t c = 0; c < chunks; ++c) {
    __m512bh w[2 * G];
    for (std::size_t g = 0; g < G; ++g) {
      const std::uint16_t* p = w_group + g * group_stride + c * panel_rows * panel_cols;
      w[2 * g] = (__m512bh)_mm512_loadu_si512(p);            // rows 0, 1 of the group: 16 weights each
      w[2 * g + 1] = (__m512bh)_mm512_loadu_si512(p + 32);   // rows 2, 3
    }
#pragma GCC unroll 6
    for (std::size_t m = 0; m < MR; ++m) {
      const __m512bh a = (__m512bh)_mm512_broadcast_i32x8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + m * Kp + c * panel_cols)));
#pragma GCC unroll 4
      for (std::size_t q = 0; q < 2 * G; ++q) acc[m][q] = _mm512_dpbf16_ps(acc[m][q], a, w[q]);
    }
  }
#pragma GCC unroll 2
  for (std::size_t g = 0; g < G; ++g) {  // unrolled, so that acc stays in registers
    const std::size_t col = g * panel_rows;
    const __mmask8 valid = o.cols >= col + panel_rows ? __mmask8(0xF) : o.cols > col ? __mmask8((1u << (o.cols - col)) - 1) : __mmask8(0);
    const __m128 bias = o.bias ? _mm_maskz_loadu_ps(valid, o.bias + col) : _mm_setzero_ps();
#pragma GCC unroll 6
    for (std::size_t m = 0; m < MR; ++m) {
      float* out = o.c + m * o.ldc + col;
      const __m128 sums = four_sums(acc[m][2 * g], acc[m][2 * g + 1]);
      _mm_mask_storeu_ps(out, valid, o.accumulate ? _mm_add_ps(_mm_maskz_loadu_ps(valid, out), sums) : _mm_add_ps(sums, bias));
    }
  }
}

/// tile_avx512 for a run-time row count mr ∈ [1, tile_rows].
template <std::size_t G>
void tile_avx512_rows(const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group, const TileOut& o) {
  switch (mr) {
    case 1: return tile_avx512<1, G>(xb, Kp, w_group, o);
    case 2: return tile_avx512<2, G>(xb, Kp, w_group, o);
    case 3: return tile_avx512<3, G>(xb, Kp, w_group, o);
    case 4: return tile_avx512<4, G>(xb, Kp, w_group, o);
    case 5: return tile_avx512<5, G>(xb, Kp, w_group, o);
    default: return tile_avx512<6, G>(xb, Kp, w_group, o);
  }
}

}  // namespace causalqwen::linalg::detail_bf16
#endif
