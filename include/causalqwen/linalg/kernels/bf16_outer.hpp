/// The bf16 products whose two operands both hold the sum's index in their rows, on the
/// outer-product kernels (kernels/bf16_outer_tiles.hpp, in their order of the sums):
/// C = Aᵀ·B (outer_product: dW = dYᵀ·X) and C = A·B with B stored with K as its rows
/// (row_outer_product: dX = dY·W, and attention's products with a KV cache), their operands
/// paired by kernels/bf16_pairs.hpp and the work split over the threads.
#pragma once
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_outer_tiles.hpp"
#include "causalqwen/linalg/kernels/bf16_pairs.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/prefetcher.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace causalqwen::linalg::detail_bf16 {

/// Rows of C per task.
inline constexpr std::size_t outer_rows_per_task = 24;

/// The rows of a product's operand as an outer-product kernel reads them: pairs (32-bit words,
/// one row per pair) for AVX512-BF16's kernel and the portable loop, or split pairs (floats, two
/// rows per pair) for AVX2's.
template <class Word>
inline constexpr std::size_t rows_per_pair = std::is_same_v<Word, float> ? 2 : 1;

/// C [N, cols] (+)= bf16(A)ᵀ·bf16(B): A [K, N] (lda), B [K, cols] (ldb), row-major, the sum
/// over their rows in the order of bf16_outer_tiles.hpp; on `isa`'s kernel, whose operands are
/// pairs or (AVX2) split pairs (Word).
template <class Word>
void outer_product(Bf16Isa isa, std::size_t N, std::size_t cols, std::size_t K, const float* a, std::size_t lda, const float* b,
                   std::size_t ldb, float* c, std::size_t ldc, bool accumulate) {
  if (N == 0 || cols == 0) return;
  const std::size_t rows = rows_per_pair<Word> * ((K + 1) / 2), lda_pairs = (N + 15) / 16 * 16,
                    ldb_pairs = (cols + outer_cols - 1) / outer_cols * outer_cols;
  thread_local PageBuffer<Word> a_pairs, b_pairs;  // [rows, lda_pairs], [rows, ldb_pairs]
  pair_rows_on(isa, a, lda, K, N, lda_pairs, a_pairs.grow(rows * lda_pairs));
  pair_rows_on(isa, b, ldb, K, cols, ldb_pairs, b_pairs.grow(rows * ldb_pairs));
  const Word *ap = a_pairs.data(), *bp = b_pairs.data();
  const std::size_t tasks = (N + outer_rows_per_task - 1) / outer_rows_per_task;
  parallel_for(tasks, N * cols * K / 8, [&](std::size_t t) {
    const std::size_t n0 = t * outer_rows_per_task, n1 = std::min(N, n0 + outer_rows_per_task);
    outer_rows_of(isa, ap, {lda_pairs, 1}, bp, ldb_pairs, rows, n0, n1, cols, c, ldc, accumulate ? OuterStore::add : OuterStore::set);
  });
}

/// Rows of A up to which row_outer_product on AVX2 reads a bf16 copy of B straight from its
/// panels, widening each value in registers once per 6 rows of A (PanelRowsB), rather than
/// widening B's blocks into split pairs once and reading them back: a decoding step's attention
/// (one query row per head of a KV group). More rows widen the same values more often.
inline constexpr std::size_t panel_read_max_rows = 2 * outer_rows;
/// Pairs of K per block of B made at once in row_outer_product (a block of 256 pairs × the
/// task's columns, made in the task's cache and used by every row of C; 128 split pairs on AVX2,
/// as many bytes).
template <class Word>
inline constexpr std::size_t row_outer_block_pairs = 256 / rows_per_pair<Word>;
/// The tasks of row_outer_product: C's columns in tiles of outer_cols, dealt into a multiple of
/// the thread count of tasks of at most row_outer_task_tiles tiles each, as evenly as the tiles
/// allow (task t: tiles [t·tiles/tasks, (t+1)·tiles/tasks)), so that the threads get equal
/// shares; the longer a task's piece of each row of B, the fewer streams its reads take. No
/// output's sum depends on the split.
inline constexpr std::size_t row_outer_task_tiles = 4;
inline std::size_t row_outer_tasks(std::size_t tiles) {
  const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  return std::min(tiles, threads * ((tiles + threads * row_outer_task_tiles - 1) / (threads * row_outer_task_tiles)));
}

/// C [M, cols] (+)= bf16(A)·bf16(B): A [M, K] (lda), B [K, cols] (ldb), row-major (dX = dY·W):
/// on `isa`'s outer-product kernel (pairs, or split pairs on AVX2: Word), each output summing the
/// pairs of K in turn (bf16_outer_tiles.hpp). A's rows rounded to bf16 are its pairs already;
/// B's rows are paired block by block inside each task (a task: some columns of C and every row),
/// so B is read once, row by row, with no transposing. The blocks' sums run in a per-task buffer, each block
/// resuming the last one's (OuterStore::resume: the bits of one pass), and are then stored in C or
/// added to it; with a single block (K ≤ 2 · row_outer_block_pairs) and C overwritten, the kernel
/// stores them in C itself. `b_panels` (optional): a bf16 copy of B in panels (panel_index, rows of
/// `b_panel_cols` values: cols rounded up to 16 when 0), which is then paired instead of rounding
/// B's floats again (the same bits; B's floats are not read); `b_abs`: B is |the copy's values|.
/// On AVX2, with a copy and at most panel_read_max_rows rows of A, the kernel reads the copy's
/// panels itself (PanelRowsB), all the pairs in one pass: the same bits.
template <class Word>
void row_outer_product(Bf16Isa isa, std::size_t M, std::size_t cols, std::size_t K, const float* a, std::size_t lda,
                       const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                       const std::uint16_t* b_panels = nullptr, bool b_abs = false, std::size_t b_panel_cols = 0) {
  if (M == 0 || cols == 0) return;
  constexpr std::size_t lines = rows_per_pair<Word>, block_pairs = row_outer_block_pairs<Word>;
  const std::size_t P = (K + 1) / 2, ld_words = lines * ((P + 15) / 16 * 16);
  thread_local PageBuffer<Word> a_words;  // [M, ld_words]
  pair_columns_on(isa, a, lda, M, K, ld_words, a_words.grow(M * ld_words));
  const Word* aw = a_words.data();
  const std::size_t Kp_b = b_panel_cols ? b_panel_cols : (cols + panel_cols - 1) / panel_cols * panel_cols;  // b_panels' row length
  constexpr std::size_t task_cols = row_outer_task_tiles * outer_cols;  // the widest task
  const std::size_t tiles = (cols + outer_cols - 1) / outer_cols, tasks = row_outer_tasks(tiles);
  parallel_for(tasks, M * cols * K / 8, [&](std::size_t t) {
    const std::size_t j0 = t * tiles / tasks * outer_cols, width = std::min(cols, (t + 1) * tiles / tasks * outer_cols) - j0;
#ifdef CAUSALQWEN_BF16_KERNEL
    if constexpr (lines == 2)
      if (b_panels && M <= panel_read_max_rows) {  // AVX2, a copy, few rows: B's panels widened in registers
        const PanelRowsB b_rows{b_panels, Kp_b, K, j0, b_abs};
        const OuterStore store = accumulate ? OuterStore::add : OuterStore::set;
        for_each_outer_tile<outer_cols_avx2>(0, M, width, nullptr, [&](auto rows, std::size_t n, std::size_t j) {
          outer_tile_avx2<decltype(rows)::value>(aw, {1, ld_words}, b_rows, 2 * P, n, j, width, c + j0, ldc, store);
        });
        return;
      }
#endif
    thread_local PageBuffer<Word> b_block;  // [lines · block_pairs, task_cols]
    thread_local PageBuffer<float> sums;    // [M, task_cols]
    // one block of pairs and C overwritten: the kernel stores its sums in C itself
    const bool direct = !accumulate && P <= block_pairs;
    b_block.grow(lines * block_pairs * task_cols);
    if (!direct) sums.grow(M * task_cols);
    constexpr std::size_t tile_cols = lines == 2 ? outer_cols_avx2 : outer_cols;
    const std::size_t tile_calls = ((width + tile_cols - 1) / tile_cols) * ((M + outer_rows - 1) / outer_rows);
    for (std::size_t p0 = 0; p0 < P; p0 += block_pairs) {
      const std::size_t pairs = std::min(block_pairs, P - p0);
      const std::size_t k_next = 2 * (p0 + pairs);  // the next block's rows of B, fetched meanwhile
      const std::size_t next_rows = std::min(K, k_next + 2 * block_pairs) - std::min(K, k_next);
      Prefetcher next;
      if (b_panels) {  // B's pairs from its copy; the next block's panels: 4 rows × width per group
        for (std::size_t p = 0; p < pairs; ++p)
          pair_panel_row_on(isa, b_panels, Kp_b, K, 2 * p0, j0, width, task_cols, p, b_block.data(), b_abs);
        next = Prefetcher(reinterpret_cast<const float*>(b_panels + panel_index(k_next, j0, Kp_b)), 2 * Kp_b,
                          (next_rows + panel_rows - 1) / panel_rows, 2 * width, tile_calls);
      } else {
        for (std::size_t p = 0; p < pairs; ++p)  // B's rows from 2·p0 on, columns [j0, j0 + width)
          pair_row_on(isa, b + 2 * p0 * ldb + j0, ldb, K - 2 * p0, width, task_cols, p, b_block.data());
        next = Prefetcher(b + k_next * ldb + j0, ldb, next_rows, width, tile_calls);
      }
      outer_rows_of(isa, aw + lines * p0, {1, ld_words}, b_block.data(), task_cols, lines * pairs, 0, M, width,
                    direct ? c + j0 : sums.data(), direct ? ldc : task_cols, p0 == 0 ? OuterStore::set : OuterStore::resume,
                    &next);
    }
    if (direct) return;
    for (std::size_t m = 0; m < M; ++m) {
      float* c_row = c + m * ldc + j0;
      const float* s_row = sums.data() + m * task_cols;
      for (std::size_t j = 0; j < width; ++j) c_row[j] = accumulate ? c_row[j] + s_row[j] : s_row[j];
    }
  });
}

}  // namespace causalqwen::linalg::detail_bf16
