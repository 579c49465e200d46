/// The AVX2 micro-kernels of the bf16 rows product (tile_avx2 and, for one row of X,
/// tile_avx2_row): rows of X split by pack_split_rows (kernels/bf16_pack.hpp) against a panel
/// group of 4 bf16 W rows widened in registers, two FMAs per pair of vdpbf16ps; the bits of
/// tile_portable. Defined where CAUSALQWEN_BF16_KERNEL is (kernels/bf16_cpu.hpp).
#pragma once
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles_portable.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#ifdef CAUSALQWEN_BF16_KERNEL
namespace causalqwen::linalg::detail_bf16 {

/// [h₀+h₂, h₁+h₃, ·, ·] of an accumulator's 8 lanes, where h_j = l_j + l_{j+4}; a row's sum
/// (lane_sum) is then (h₀ + h₂) + (h₁ + h₃), the two lanes added by vhaddps.
CAUSALQWEN_TARGET_AVX2 inline __m128 half_sums(__m256 a) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  return _mm_add_ps(h, _mm_movehl_ps(h, h));
}

/// [y₀, y₁, y₂, y₃]: the sums of four accumulators (four W rows), each as lane_sum adds them.
CAUSALQWEN_TARGET_AVX2 inline __m128 four_sums_avx2(const __m256* acc) {
  return _mm_hadd_ps(_mm_movelh_ps(half_sums(acc[0]), half_sums(acc[1])), _mm_movelh_ps(half_sums(acc[2]), half_sums(acc[3])));
}

/// Writes the four sums of a tile's row for its W rows from `col` on that exist (o.cols): at
/// out + col, as sum + bias, or out + sum when accumulating.
CAUSALQWEN_TARGET_AVX2 inline void store_four(__m128 sums, const TileOut& o, float* out, std::size_t col) {
  const std::size_t valid = std::min(o.cols - col, panel_rows);
  out += col;
  if (valid == panel_rows) {
    const __m128 bias = o.bias ? _mm_loadu_ps(o.bias + col) : _mm_setzero_ps();
    _mm_storeu_ps(out, o.accumulate ? _mm_add_ps(_mm_loadu_ps(out), sums) : _mm_add_ps(sums, bias));
    return;
  }
  alignas(16) float y[panel_rows];
  _mm_store_ps(y, sums);
  for (std::size_t r = 0; r < valid; ++r) out[r] = o.accumulate ? out[r] + y[r] : y[r] + (o.bias ? o.bias[col + r] : 0.0f);
}

/// The AVX2 kernel: MR rows of xs (pack_split_rows) × the 4 W rows of one panel group (12
/// accumulators of 8 lanes for MR = 3; the split W row and the mask in 3 of the other 4
/// registers). Per chunk, each W row's 16 bf16 values (8 words of an odd value over an even one)
/// become the floats of its odd values (the words masked to their high half) and of its even
/// ones (the words shifted up 16 bits), and lane j of each output takes
///   l_j ← fma(x_{2j+1}, w_{2j+1}, l_j),  then  l_j ← fma(x_{2j}, w_{2j}, l_j).
/// (Chosen over a tile of 4 rows × 2 W rows, whose loads of X each serve four FMAs: no faster for
/// a prefill, slower for a decoding step.)
/// `chunks` chunks from xs and w_group (rows of xs Kp apart); `lanes`: K in blocks (TileLanes).
template <std::size_t MR>
CAUSALQWEN_TARGET_AVX2 void tile_avx2(const float* xs, std::size_t Kp, std::size_t chunks, const std::uint16_t* w_group,
                                      const TileOut& o, const TileLanes& lanes) {
  const __m256i high_half = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[MR][panel_rows];
  for (std::size_t m = 0; m < MR; ++m)
    for (std::size_t r = 0; r < panel_rows; ++r)
      acc[m][r] = lanes.resume ? _mm256_load_ps(lanes.at + (m * lanes.ld + r) * 8) : _mm256_setzero_ps();
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint16_t* w_chunk = w_group + c * panel_rows * panel_cols;
#pragma GCC unroll 4
    for (std::size_t r = 0; r < panel_rows; ++r) {
      const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_chunk + r * panel_cols));
      const __m256 w_odd = _mm256_castsi256_ps(_mm256_and_si256(words, high_half));
      const __m256 w_even = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
#pragma GCC unroll 3
      for (std::size_t m = 0; m < MR; ++m) {
        const float* x = xs + m * Kp + c * panel_cols;
        acc[m][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x), w_odd, acc[m][r]);
        acc[m][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + panel_cols / 2), w_even, acc[m][r]);
      }
    }
  }
  if (lanes.keep) {
    for (std::size_t m = 0; m < MR; ++m)
      for (std::size_t r = 0; r < panel_rows; ++r) _mm256_store_ps(lanes.at + (m * lanes.ld + r) * 8, acc[m][r]);
    return;
  }
#pragma GCC unroll 3
  for (std::size_t m = 0; m < MR; ++m) store_four(four_sums_avx2(acc[m]), o, o.c + m * o.ldc, 0);
}

/// tile_avx2 for one row of X (a decoding step) over all of K: X's chunk is loaded once for the
/// group's 4 W rows, and W is read as one sequential stream (one panel group per tile, which the
/// hardware prefetcher follows), each vector of it loaded once and no line asked for ahead (a
/// software prefetch slowed this loop). GCC, left alone, loads each vector of W twice (for the
/// mask and for the shift) and X's once per row; the empty `asm` statements hold them in
/// registers instead.
/// Kept out of line: inlined into `multiply`, it slowed the prefill's loop around tile_avx2.
CAUSALQWEN_TARGET_AVX2 __attribute__((noinline)) inline void tile_avx2_row(const float* xs, std::size_t Kp, const std::uint16_t* w_group, const TileOut& o) {
  const std::size_t chunks = Kp / panel_cols;
  const __m256i high_half = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[panel_rows];
  for (std::size_t r = 0; r < panel_rows; ++r) acc[r] = _mm256_setzero_ps();
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint16_t* w_chunk = w_group + c * panel_rows * panel_cols;  // 128 bytes: two lines
    __m256 x_odd = _mm256_loadu_ps(xs + c * panel_cols), x_even = _mm256_loadu_ps(xs + c * panel_cols + panel_cols / 2);
    asm("" : "+x"(x_odd), "+x"(x_even));  // in registers for the four rows, not loaded again by each
#pragma GCC unroll 4
    for (std::size_t r = 0; r < panel_rows; ++r) {
      __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_chunk + r * panel_cols));
      asm("" : "+x"(words));  // one load of W's vector, held in a register for the mask and the shift
      const __m256 w_odd = _mm256_castsi256_ps(_mm256_and_si256(words, high_half));
      const __m256 w_even = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
      acc[r] = _mm256_fmadd_ps(x_even, w_even, _mm256_fmadd_ps(x_odd, w_odd, acc[r]));
    }
  }
  store_four(four_sums_avx2(acc), o, o.c, 0);
}

}  // namespace causalqwen::linalg::detail_bf16
#endif
