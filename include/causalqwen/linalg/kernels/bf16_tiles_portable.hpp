/// The portable micro-kernel of the bf16 rows product (tile_portable: rows of bf16 X against
/// panel groups of 4 bf16 W rows, each lane and sum in the order of bf16_gemm.hpp's file
/// comment), and what every tile of that product shares: where its outputs go (TileOut), the
/// lane accumulators kept between blocks of K (TileLanes), and a row's lane sum (lane_sum).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <cstddef>
#include <cstdint>

namespace causalqwen::linalg::detail_bf16 {

/// y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)): a row's eight lane sums, in the kernel's order.
inline float lane_sum(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
/// Where a tile's outputs go: row m, column r of the tile is c[m·ldc + r], for r < `cols`
/// (the tile's W rows that exist), written as sum + bias[r] (bias null: sum + 0) or, when
/// `accumulate`, as c + sum.
struct TileOut {
  float* c;
  std::size_t ldc, cols;
  const float* bias;
  bool accumulate;
};

/// The lane accumulators of an AVX2 tile whose K is cut into blocks: those of output (m, r) at
/// at + (m·ld + r)·8. `resume`: the tile starts from them (not from 0); `keep`: it stores them
/// there instead of the sums (stored and loaded exactly, so the blocks give one pass's bits).
/// None (at null): one pass.
struct TileLanes {
  float* at = nullptr;
  std::size_t ld = 0;
  bool resume = false, keep = false;
};

/// The portable kernel: the outputs of rows [0, mr) of xb and the 4·G W rows of the groups
/// from w_group, each lane and sum in the order of bf16_gemm.hpp's file comment.
CAUSALQWEN_NO_LOOP_VECTORIZE inline void tile_portable(const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group,
                          std::size_t G, const TileOut& o) {
  const std::size_t chunks = Kp / panel_cols, group_stride = panel_rows * Kp;
  for (std::size_t m = 0; m < mr; ++m)
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t r = 0; r < panel_rows; ++r) {
        float l[8];
        for (std::size_t j = 0; j < 8; ++j) {  // lane j, through the chunks
          float lane = 0;
          for (std::size_t c = 0; c < chunks; ++c) {
            const std::uint16_t* w = w_group + g * group_stride + c * panel_rows * panel_cols + r * panel_cols;
            const std::uint16_t* a = xb + m * Kp + c * panel_cols;
            // the products are exact in float: no contraction into an FMA can change them
            lane = lane + bf16_to_float(a[2 * j + 1]) * bf16_to_float(w[2 * j + 1]);
            lane = lane + bf16_to_float(a[2 * j]) * bf16_to_float(w[2 * j]);
          }
          l[j] = lane;
        }
        const std::size_t col = g * panel_rows + r;
        if (col >= o.cols) continue;
        float& out = o.c[m * o.ldc + col];
        out = o.accumulate ? out + lane_sum(l) : lane_sum(l) + (o.bias ? o.bias[col] : 0.0f);
      }
}

}  // namespace causalqwen::linalg::detail_bf16
