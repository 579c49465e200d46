/// The lane products of the bf16 rows product on AVX2, for many rows of X (multiply_lanes).
/// On AVX2 a product of many rows runs as eight float products, one per lane of the sums
/// (bf16_gemm.hpp's file comment), on the float GEMM's 6 × 16 tile (f32_gemm.hpp), whose outputs
/// are each one chain of FMAs over k in order: lane j's sum l_j is exactly such a chain over
/// K' = 2·Kp/16 values, the pairs of lane j chunk by chunk, odd value first,
///   l_j[m,n] = Σ_{k'} a_j[m,k']·b_j[k',n]  (one FMA chain),  a_j[m,2c] = x_{m,16c+2j+1}, a_j[m,2c+1] = x_{m,16c+2j},
/// and b_j likewise from W's rows; then y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)) (+ b). The
/// same bits as the dot-product tile (tile_avx2), whose twelve accumulators each take two
/// dependent FMAs per chunk and whose loads of X exceed its FMAs; the float tile's 12 chains
/// read one broadcast and two vectors per 12 FMAs.
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/f32_gemm.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_pack.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace causalqwen::linalg::detail_bf16 {

/// Rows of X from which the AVX2 kernel runs the lane products (fewer: tile_avx2, which needs no
/// widened copy of W): below about two dozen rows the widened copy costs more than the lanes
/// save, above it the lanes win, more so the more rows.
inline constexpr std::size_t lane_products_min_rows = 24;
/// The lanes, the pairs (2j, 2j+1) of a chunk.
inline constexpr std::size_t lane_count = panel_cols / 2;
/// W rows per task of the lane products (4 panels of the float tile's 16 columns).
inline constexpr std::size_t lane_task_rows = 64;
/// Rows of X per block of a lane task: its eight lanes' sums [8, 48, 64] (96 KiB) stay in L2.
inline constexpr std::size_t lane_block_rows = 48;
/// Rows of X per panel of the lane products' A: the float AVX2 tile's rows.
inline constexpr std::size_t lane_panel_rows = 6;

/// X's rows as the eight lanes' operands, in the float tile's panels of A (6 rows each, a panel's
/// values k' after k' of one row group): xl [8][⌈M/6⌉][K'][6] (K' = Kp/8), row m of lane j in
/// panel m/6 at lane m%6,
///   xl[j][m/6][2c][m%6] = x_{m,16c+2j+1},  xl[j][m/6][2c+1][m%6] = x_{m,16c+2j}
/// (bf16 values widened to float, exact; 0 past K and past M). x_mk at x[m·ld + k], or at
/// x[k·ld + m] when `transposed`.
inline void pack_lane_rows(const float* x, std::size_t ld, bool transposed, std::size_t M, std::size_t K, std::size_t Kp,
                           float* xl) {
  const std::size_t K2 = Kp / lane_count, panels = (M + lane_panel_rows - 1) / lane_panel_rows;
  const auto rounded = [&](std::size_t m, std::size_t k) {
    return m < M && k < K ? bf16_to_float(float_to_bf16(transposed ? x[k * ld + m] : x[m * ld + k])) : 0.0f;
  };
  parallel_for(panels * lane_panel_rows, M * Kp, [&](std::size_t m) {
    for (std::size_t j = 0; j < lane_count; ++j) {
      float* at = xl + (j * panels + m / lane_panel_rows) * K2 * lane_panel_rows + m % lane_panel_rows;
      for (std::size_t c = 0; c < Kp / panel_cols; ++c) {
        at[2 * c * lane_panel_rows] = rounded(m, c * panel_cols + 2 * j + 1);
        at[(2 * c + 1) * lane_panel_rows] = rounded(m, c * panel_cols + 2 * j);
      }
    }
  });
}

#if defined(CAUSALQWEN_BF16_KERNEL) && defined(CAUSALQWEN_F32_KERNEL)
/// W's rows [0, R) (bf16 panels from `group`, R ≤ lane_task_rows) as the float tile's B panels
/// of the eight lanes, bl [8][P][K'][16] (P = ⌈R/16⌉ panels of 16 rows; 0 in rows past R):
///   bl[j][p][2c][t] = w_{16p+t, 16c+2j+1},  bl[j][p][2c+1][t] = w_{16p+t, 16c+2j}.
/// Eight rows' words of a chunk (a word: an even value low, the odd one high) are transposed 8 × 8
/// in registers, so that register j holds pair j of the eight rows; its high halves are the odd
/// values as floats, its words shifted up 16 bits the even ones.
CAUSALQWEN_TARGET_AVX2 inline void widen_lane_panels(const std::uint16_t* group, std::size_t R, std::size_t Kp, float* bl) {
  using Tile = detail_f32::Avx2;
  const std::size_t K2 = Kp / lane_count, P = (R + Tile::nr - 1) / Tile::nr, chunks = Kp / panel_cols;
  const __m256i high_half = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t half = 0; half < Tile::nr / 8; ++half) {
      const std::size_t r0 = p * Tile::nr + half * 8;
      for (std::size_t c = 0; c < chunks; ++c) {
        __m256 block[8];
        for (std::size_t i = 0; i < 8; ++i) {
          const std::size_t r = r0 + i;
          block[i] = r < R ? _mm256_loadu_ps(reinterpret_cast<const float*>(group + panel_index(r, c * panel_cols, Kp)))
                           : _mm256_setzero_ps();
        }
        Tile::transpose8(block);
        for (std::size_t j = 0; j < lane_count; ++j) {
          const __m256i words = _mm256_castps_si256(block[j]);
          float* at = bl + ((j * P + p) * K2 + 2 * c) * Tile::nr + half * 8;
          _mm256_store_ps(at, _mm256_castsi256_ps(_mm256_and_si256(words, high_half)));
          _mm256_store_ps(at + Tile::nr, _mm256_castsi256_ps(_mm256_slli_epi32(words, 16)));
        }
      }
    }
}

/// c's columns [0, R) of X's rows (+)= the lane products of xl (pack_lane_rows) with W's rows
/// [0, R) (bl from widen_lane_panels), block by block of lane_block_rows rows: each lane's
/// outputs by the float tile into `sums` [8][lane_block_rows][P·16], then the lanes added in
/// bf16_gemm.hpp's order, written as y + bias (bias may be null: y + 0), or c + y when
/// `accumulate`.
CAUSALQWEN_TARGET_AVX2 inline void lane_task(const float* xl, std::size_t M, std::size_t K2, const float* bl, std::size_t R,
                                             float* c, std::size_t ldc, bool accumulate, const float* bias, float* sums) {
  using Tile = detail_f32::Avx2;
  static_assert(Tile::mr == lane_panel_rows && lane_block_rows % lane_panel_rows == 0,
                "The lane products' panels of X must be the float AVX2 tile's rows.");
  const std::size_t P = (R + Tile::nr - 1) / Tile::nr, ld = P * Tile::nr, full = R / 8 * 8;
  const std::size_t panels = (M + Tile::mr - 1) / Tile::mr;
  for (std::size_t m0 = 0; m0 < M; m0 += lane_block_rows) {
    const std::size_t m_end = std::min(M, m0 + lane_block_rows);
    for (std::size_t j = 0; j < lane_count; ++j) {
      const float* a = xl + j * panels * K2 * Tile::mr;  // lane j's panels [⌈M/6⌉][K'][6]
      float* out = sums + j * lane_block_rows * ld;
      for (std::size_t m = m0; m < m_end; m += Tile::mr) {
        const std::size_t rows = std::min(Tile::mr, m_end - m);
        for (std::size_t p = 0; p < P; ++p)  // all 16 columns of each tile: the sums have room
          Tile::tile(a + (m / Tile::mr) * K2 * Tile::mr, bl + (j * P + p) * K2 * Tile::nr, K2, out + (m - m0) * ld + p * Tile::nr,
                     ld, rows, Tile::nr, false);
      }
    }
    for (std::size_t m = m0; m < m_end; ++m) {
      const float* l = sums + (m - m0) * ld;  // lane j at l + j·lane_block_rows·ld
      const std::size_t lane = lane_block_rows * ld;
      float* y_row = c + m * ldc;
      std::size_t n = 0;
      for (; n < full; n += 8) {
        __m256 v[lane_count];
        for (std::size_t j = 0; j < lane_count; ++j) v[j] = _mm256_loadu_ps(l + j * lane + n);
        const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                                       _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
        const __m256 to = accumulate ? _mm256_loadu_ps(y_row + n) : bias ? _mm256_loadu_ps(bias + n) : _mm256_setzero_ps();
        _mm256_storeu_ps(y_row + n, _mm256_add_ps(to, y));
      }
      for (; n < R; ++n) {
        const auto at = [&](std::size_t j) { return l[j * lane + n]; };
        const float y = ((at(0) + at(4)) + (at(2) + at(6))) + ((at(1) + at(5)) + (at(3) + at(7)));
        y_row[n] = accumulate ? y_row[n] + y : y + (bias ? bias[n] : 0.0f);
      }
    }
  }
}
#endif

/// c [M,N] (=|+=) the lane products of xl (pack_lane_rows) with the N rows of `w`: the bits of
/// `multiply`, on the AVX2 float tile. Tasks of lane_task_rows W rows, each widening its rows
/// once into its own B panels.
inline void multiply_lanes([[maybe_unused]] Bf16Isa isa, [[maybe_unused]] const float* xl, [[maybe_unused]] std::size_t M,
                           [[maybe_unused]] std::size_t Kp, [[maybe_unused]] const PanelSource& w, [[maybe_unused]] std::size_t N,
                           [[maybe_unused]] float* c, [[maybe_unused]] std::size_t ldc, [[maybe_unused]] bool accumulate,
                           [[maybe_unused]] const float* bias) {
#if defined(CAUSALQWEN_BF16_KERNEL) && defined(CAUSALQWEN_F32_KERNEL)
  const std::size_t K2 = Kp / lane_count, tasks = (N + lane_task_rows - 1) / lane_task_rows;
  parallel_for(tasks, M * N * Kp / 8 + N * Kp, [&](std::size_t t) {
    const std::size_t n0 = t * lane_task_rows, n1 = std::min(N, n0 + lane_task_rows);
    thread_local PageBuffer<std::uint16_t> task_panels;  // [lane_task_rows, Kp]
    thread_local PageBuffer<float> lane_panels;          // [8][4][K'][16]: the task's W rows as B panels
    thread_local PageBuffer<float> sums;                 // [8][lane_block_rows][64]
    widen_lane_panels(task_group(isa, w, n0, n1, Kp, lane_task_rows, task_panels), n1 - n0, Kp,
                      lane_panels.grow(lane_task_rows * Kp));
    lane_task(xl, M, K2, lane_panels.data(), n1 - n0, c + n0, ldc, accumulate, bias ? bias + n0 : nullptr,
              sums.grow(lane_count * lane_block_rows * lane_task_rows));
  });
#endif
}

}  // namespace causalqwen::linalg::detail_bf16
