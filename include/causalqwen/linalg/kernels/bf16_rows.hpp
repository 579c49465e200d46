/// The bf16 rows product, Y [M,N] (=|+=) bf16(X)·Wᵀ (+ b), on an instruction set: its tiling
/// and thread split (multiply, over the micro-kernels of kernels/bf16_tiles.hpp), X rounded once
/// per call (multiply_x: bf16 rows, split rows for AVX2, or the AVX2 lane products of
/// kernels/bf16_lanes.hpp from lane_products_min_rows rows on), and the products of a linear
/// layer with a bf16 or an int8 copy of W (forward, forward_int8).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_lanes.hpp"
#include "causalqwen/linalg/kernels/bf16_pack.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/prefetcher.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace causalqwen::linalg::detail_bf16 {

/// Rows of X per micro-tile; panel groups of 4 W rows per micro-tile: 2 (6 × 8 outputs, 24
/// accumulators), or 1 when X has at most 2 rows (a decoding step, bound by reading W: one
/// group at a time reads the panels as one sequential stream, which the prefetcher follows better
/// than two or four interleaved streams).
inline constexpr std::size_t tile_rows = 6, tile_groups = 2, few_rows_tile_groups = 1;
/// The AVX2 kernel's micro-tile: 3 rows of X × 1 panel group.
inline constexpr std::size_t avx2_tile_rows = 3, avx2_tile_groups = 1;
/// W rows handed to one task of the thread split (a multiple of 8): 64, or fewer when K is
/// long, so that a task's bf16 panels (rows × Kp × 2 bytes) stay within task_panel_bytes, in
/// the core's L2 beside the block of X, while every block of X rows streams over them.
inline constexpr std::size_t rows_per_task = 64;
inline constexpr std::size_t task_panel_bytes = 384 * 1024;
inline std::size_t task_rows(std::size_t Kp) {
  return std::clamp<std::size_t>(task_panel_bytes / (2 * Kp) / 8 * 8, 8, rows_per_task);
}
/// Bytes of bf16 X that one block of rows may take (kept in the core's L2 while W streams).
inline constexpr std::size_t x_block_bytes = 192 * 1024;
/// Chunks of K per block of the AVX2 kernel when X has more than 2 rows and K is longer: 64
/// (1,024 values: a tile's 3 rows of split X, 12 KiB, and its panel group, 8 KiB, stay in L1;
/// without blocks, the down projection's K of 4,864 did not fit, and its product ran slower).
inline constexpr std::size_t avx2_block_chunks = 64;

/// c [M,N] (=|+=) the products of X's rows [M,Kp] with the N rows of `w`, each output in the
/// order of bf16_gemm.hpp's file comment; written as out + bias (bias may be null: out + 0), or
/// added to c when `accumulate`. X's rows are bf16 (XRow = std::uint16_t: AVX512-BF16 or the portable loop,
/// as `isa` says) or floats split by pack_split_rows (XRow = float: AVX2).
template <class XRow>
void multiply(Bf16Isa isa, const XRow* xb, std::size_t M, std::size_t Kp, const PanelSource& w, std::size_t N, float* c,
              std::size_t ldc, bool accumulate, const float* bias) {
  constexpr bool split = std::is_same_v<XRow, float>;
  constexpr std::size_t mr = split ? avx2_tile_rows : tile_rows;
  // AVX2 with more than 2 rows of X: K in blocks of avx2_block_chunks chunks when longer
  const std::size_t chunks = Kp / panel_cols;
  const bool k_blocks = split && M > 2 && chunks > avx2_block_chunks;
  const std::size_t block_chunks = k_blocks ? avx2_block_chunks : chunks;
  const std::size_t block_rows = std::max(mr, x_block_bytes / (sizeof(XRow) * block_chunks * panel_cols) / mr * mr);
  const std::size_t per_task = M <= 2 ? rows_per_task : task_rows(Kp);
  const std::size_t tasks = (N + per_task - 1) / per_task;
  const std::size_t groups = split ? avx2_tile_groups : M <= 2 ? few_rows_tile_groups : tile_groups;
  // tile calls per task: the float rows of the next task are prefetched across them
  const std::size_t tile_calls = ((M + block_rows - 1) / block_rows) * ((chunks + block_chunks - 1) / block_chunks) *
                                 ((block_rows + mr - 1) / mr) * ((per_task + panel_rows * groups - 1) / (panel_rows * groups));
  parallel_for(tasks, M * N * Kp / 8 + N * Kp, [&](std::size_t t) {
    const std::size_t n0 = t * per_task, n1 = std::min(N, n0 + per_task);
    // the panels of rows [n0, n1): the packed ones, or this task's rows packed now
    thread_local PageBuffer<std::uint16_t> task_panels;  // [per_task, Kp], grown once per shape
    const std::uint16_t* first_group = task_group(isa, w, n0, n1, Kp, per_task, task_panels);
    Prefetcher next;  // the float rows the next task packs, read into L2 while this one multiplies
    if (!w.panels && !w.int8_panels && n1 < N) {  // R's rows [n1, n2): rows of src, or its columns when transposed
      const std::size_t n2 = std::min(N, n1 + per_task);
      next = w.transposed ? Prefetcher(w.src + n1, w.ld, w.K, n2 - n1, tile_calls)
                          : Prefetcher(w.src + n1 * w.ld, w.ld, n2 - n1, w.K, tile_calls);
    }
    thread_local PageBuffer<float> lanes;  // [block_rows, per_task, 8]: the lane sums between blocks of K
    if (k_blocks) lanes.grow(block_rows * per_task * 8);
    for (std::size_t m0 = 0; m0 < M; m0 += block_rows) {
      const std::size_t m_end = std::min(M, m0 + block_rows);
      for (std::size_t c0 = 0; c0 < chunks; c0 += block_chunks) {
        const std::size_t c1 = std::min(chunks, c0 + block_chunks);
        for (std::size_t n = n0; n < n1; n += panel_rows * groups) {
          const std::size_t rows = std::min(panel_rows * groups, n1 - n);
          const std::size_t G = (rows + panel_rows - 1) / panel_rows;
          const std::uint16_t* group = first_group + ((n - n0) / panel_rows) * panel_rows * Kp + c0 * panel_rows * panel_cols;
          for (std::size_t m = m0; m < m_end; m += mr) {
            next.prefetch_some();
            const TileOut out{c + m * ldc + n, ldc, rows, bias ? bias + n : nullptr, accumulate};
            if constexpr (split) {
              const TileLanes tile_lanes =
                  k_blocks ? TileLanes{lanes.data() + ((m - m0) * per_task + (n - n0)) * 8, per_task, c0 > 0, c1 < chunks} : TileLanes{};
              tile(xb + m * Kp + c0 * panel_cols, Kp, c1 - c0, std::min(mr, m_end - m), group, out, tile_lanes);
            } else {
              tile(isa, xb + m * Kp, Kp, std::min(mr, m_end - m), group, G, out);
            }
          }
        }
      }
    }
  });
}

/// c [M,N] (=|+=) bf16(X)·the N rows of `w` (+ bias), as `multiply` sums them: X [M,K] (x_mk at
/// x[m·ld + k], or x[k·ld + m] when `transposed`) rounded once into a per-thread buffer (grown
/// once per shape): split floats for the AVX2 kernel, bf16 rows for AVX512-BF16's or the
/// portable loop. The kernels' scratch buffers are PageBuffers, 64-byte aligned, so that no
/// vector load of a chunk straddles two cache lines (with std::vector's 16-byte alignment half
/// of the AVX2 kernel's loads of X would, and its prefill would run slower).
inline void multiply_x(Bf16Isa isa, const float* x, std::size_t ld, bool transposed, std::size_t M, std::size_t K,
                       std::size_t Kp, const PanelSource& w, std::size_t N, float* c, std::size_t ldc, bool accumulate,
                       const float* bias) {
  if (isa == Bf16Isa::avx2 && M >= lane_products_min_rows) {
    thread_local PageBuffer<float> xl;  // [8, ⌈M/6⌉, Kp/8, 6]
    pack_lane_rows(x, ld, transposed, M, K, Kp, xl.grow((M + lane_panel_rows - 1) / lane_panel_rows * lane_panel_rows * Kp));
    return multiply_lanes(isa, xl.data(), M, Kp, w, N, c, ldc, accumulate, bias);
  }
  if (isa == Bf16Isa::avx2) {
    thread_local PageBuffer<float> xs;  // [M, Kp]
    pack_split_rows(x, ld, transposed, M, K, Kp, xs.grow(M * Kp));
    return multiply(isa, xs.data(), M, Kp, w, N, c, ldc, accumulate, bias);
  }
  thread_local PageBuffer<std::uint16_t> xb;  // [M, Kp]
  pack(isa, x, ld, transposed, M, K, Kp, PackLayout::rows, xb.grow(M * Kp));
  multiply(isa, xb.data(), M, Kp, w, N, c, ldc, accumulate, bias);
}

/// Refuses, naming `fn`, a copy W that is not of type `type`, does not match X [M,K], starts
/// inside a panel group, or a Y that is not [M,N] or a b (when given) that is not [N].
inline void require_copy_fits(Format type, const char* fn, TensorView<float, 2> y, TensorView<const float, 2> x,
                              const PackedRef& w, TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows;
  detail::require(w.type == type, fn, "W is {}, not {} {} copy", format_name(w.type), type == Format::int8 ? "an" : "a",
                  format_name(type));
  detail::require(w.cols == K, fn, "W [{},{}] does not match X {}", N, w.cols, shape_text(x.shape));
  detail::require(w.row0 % panel_rows == 0, fn, "W starts at row {} of its panels, not at a multiple of 4", w.row0);
  require_shape(y, {M, N}, fn, "Y");
  if (!b.empty()) require_shape(b, {N}, fn, "b");
}

/// Y = bf16(X)·Wᵀ (+ b) on the instruction set `isa` (which the CPU must have): the same sums.
inline void forward(Bf16Isa isa, TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                    TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows, Kp = w.cols_padded;
  require_copy_fits(Format::bf16, "bf16_linear_forward", y, x, w, b);
  if (M == 0 || N == 0) return;
  const std::uint16_t* first_group = w.bf16 + (w.row0 / panel_rows) * panel_rows * Kp;
  const PanelSource panels{first_group, nullptr, 0, 0, false, w.abs};
  multiply_x(isa, x.data, K, false, M, K, Kp, panels, N, y.data, N, false, b.empty() ? nullptr : b.data);
}

/// Y = s ⊙ (bf16(X)·Qᵀ) + b on the instruction set `isa`: W an int8 copy (w_nk = q_nk·s_n), each
/// output the bf16 product's sum of X's row with q_n (as `multiply` sums them; the products
/// exact), times s_n, plus b_n.
inline void forward_int8(Bf16Isa isa, TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                         TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows, Kp = w.cols_padded;
  require_copy_fits(Format::int8, "int8_rows_linear_forward", y, x, w, b);
  if (M == 0 || N == 0) return;
  PanelSource panels;
  panels.int8_panels = w.q + (w.row0 / panel_rows) * panel_rows * Kp;
  multiply_x(isa, x.data, K, false, M, K, Kp, panels, N, y.data, N, false, nullptr);
  const float* scale = w.row_scale + w.row0;
  parallel_for(M, M * N, [&](std::size_t m) {
    float* row = y.data + m * N;
    if (b.empty())
      for (std::size_t n = 0; n < N; ++n) row[n] *= scale[n];
    else
      for (std::size_t n = 0; n < N; ++n) row[n] = row[n] * scale[n] + b.data[n];
  });
}

}  // namespace causalqwen::linalg::detail_bf16
