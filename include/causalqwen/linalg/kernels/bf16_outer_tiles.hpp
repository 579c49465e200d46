/// The bf16 outer-product kernels, for the products whose two operands both hold the sum's index
/// in their rows (kernels/bf16_outer.hpp: C = Aᵀ·B as dW = dYᵀ·X, and C = A·B with B's rows along
/// K as dX = dY·W): their tiles on AVX512-BF16, AVX2 and the portable loop (the same bits), and
/// the walk over the tiles of a block of C's rows.
/// Their sums are short (K = the tokens of a batch) and C is large: an outer-product kernel keeps
/// 16 outputs per accumulator and needs no lane sums at the end. Each output sums the pairs
/// (2p, 2p+1) of K in turn, as vdpbf16ps adds them:  c ← (c + a_{2p+1}·b_{2p+1}) + a_{2p}·b_{2p}.
/// On AVX2 the pairs are split instead: pair p becomes two float rows, k' = 2p holding the bf16
/// values of row 2p+1 and k' = 2p+1 those of row 2p (widened, exact), and each output sums its
/// terms over k' in turn, one FMA each (the products are exact): the same order, the same bits.
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_vectors.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/prefetcher.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace causalqwen::linalg::detail_bf16 {

/// Output rows and 16-column vectors per tile of the outer-product kernel.
inline constexpr std::size_t outer_rows = 6, outer_vectors = 4, outer_cols = 16 * outer_vectors;
/// Output columns (two vectors of 8) per tile of the AVX2 outer-product kernel, outer_rows high:
/// 12 accumulators, the two vectors of B's row and a broadcast of A's value in the other registers.
inline constexpr std::size_t outer_cols_avx2 = 16;

/// Where the outer-product kernels read A's pairs: pair p of C's row n at a[p·p_stride + n·row_stride]
/// ([P, ld] pairs of rows: p_stride ld, row_stride 1; a bf16 row per row of C: p_stride 1).
struct PairStrides {
  std::size_t p_stride, row_stride;
};

/// What an outer-product kernel does with C: C = the sum (`set`), C + the sum (`add`), or the sum
/// started from C's value and stored (`resume`: a sum run block after block of pairs gives the
/// bits of one pass, since each float sum is stored and loaded exactly).
enum class OuterStore { set, add, resume };

/// The portable outer-product kernel: C [N, cols] (+)= Σ_p pairs of A (rows [n0, n1) of C, read
/// at `as`) · pairs of B [P, ldb_pairs], each output in the order above.
CAUSALQWEN_NO_LOOP_VECTORIZE inline void outer_portable(const std::uint32_t* a, PairStrides as, const std::uint32_t* b,
                                                        std::size_t ldb_pairs, std::size_t P, std::size_t n0, std::size_t n1,
                                                        std::size_t cols, float* c, std::size_t ldc, OuterStore store) {
  const auto lo = [](std::uint32_t w) { return bf16_to_float(static_cast<std::uint16_t>(w)); };
  const auto hi = [](std::uint32_t w) { return bf16_to_float(static_cast<std::uint16_t>(w >> 16)); };
  for (std::size_t n = n0; n < n1; ++n)
    for (std::size_t j = 0; j < cols; ++j) {
      float sum = store == OuterStore::resume ? c[n * ldc + j] : 0.0f;
      for (std::size_t p = 0; p < P; ++p) {
        const std::uint32_t x = a[p * as.p_stride + n * as.row_stride], y = b[p * ldb_pairs + j];
        sum = sum + hi(x) * hi(y);  // exact products: no contraction can change them
        sum = sum + lo(x) * lo(y);
      }
      c[n * ldc + j] = store == OuterStore::add ? c[n * ldc + j] + sum : sum;
    }
}

#ifdef CAUSALQWEN_BF16_KERNEL
/// The split rows of B as the AVX2 outer-product kernel reads them: row k' at b + k'·ldb (the
/// rows split_row_avx2 and split_panel_row_avx2 write), columns [j, j + 16) as two vectors.
struct SplitRowsB {
  const float* b;
  std::size_t ldb;
  CAUSALQWEN_TARGET_AVX2 void operator()(std::size_t k, std::size_t j, __m256& b0, __m256& b1) const {
    b0 = _mm256_loadu_ps(b + k * ldb + j);
    b1 = _mm256_loadu_ps(b + k * ldb + j + 8);
  }
};

/// The same split rows read straight from a bf16 copy of B in panels (panel_index, Kp columns)
/// and widened in registers: split row k' = 2p + h is the copy's row 2p + 1 − h (0 at K and past
/// it), columns [j0 + j, j0 + j + 16), |values| when `abs`: split_panel_row_avx2's values, with
/// no pass that writes them out first.
struct PanelRowsB {
  const std::uint16_t* panels;
  std::size_t Kp, K, j0;
  bool abs;
  CAUSALQWEN_TARGET_AVX2 void operator()(std::size_t k_split, std::size_t j, __m256& b0, __m256& b1) const {
    const std::size_t k = (k_split | 1) - (k_split & 1);
    if (k >= K) {
      b0 = b1 = _mm256_setzero_ps();
      return;
    }
    const __m128i value_bits = _mm_set1_epi16(static_cast<short>(abs ? 0x7FFF : 0xFFFF));
    const std::uint16_t* at = panels + panel_index(k, j0 + j, Kp);
    b0 = widen8_avx2(at, value_bits);
    b1 = widen8_avx2(at + 8, value_bits);
  }
};

/// The AVX2 outer-product kernel: rows [n, n + MR) × columns [j, j + 16) of C (those below
/// `cols`), summing k' ∈ [0, K2) in turn: c ← fma(a_k'n, b_k'j, c), with A's value of row n at
/// a[k'·p_stride + n·row_stride] and B's row k' from `b_rows` (SplitRowsB or PanelRowsB).
template <std::size_t MR, class BRows>
CAUSALQWEN_TARGET_AVX2 void outer_tile_avx2(const float* a, PairStrides as, const BRows& b_rows, std::size_t K2,
                                            std::size_t n, std::size_t j, std::size_t cols, float* c, std::size_t ldc,
                                            OuterStore store) {
  // C's columns of the tile that exist: whole vectors are loaded and stored plainly (vmaskmovps
  // costs about a dozen cycles on AMD's cores), the last tile of a row masked
  const std::size_t valid = std::min(outer_cols_avx2, cols - j);
  const bool whole = valid == outer_cols_avx2;
  const __m256i mask[2] = {first_lanes_avx2(valid), first_lanes_avx2(valid > 8 ? valid - 8 : 0)};
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (std::size_t r = 0; r < MR; ++r)
    for (std::size_t v = 0; v < 2; ++v)
      acc[r][v] = store == OuterStore::resume ? load8_avx2(c + (n + r) * ldc + j + 8 * v, whole, mask[v]) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (std::size_t k = 0; k < K2; ++k) {
    __m256 b0, b1;
    b_rows(k, j, b0, b1);
    const float* ak = a + k * as.p_stride + n * as.row_stride;
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(ak + r * as.row_stride);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (std::size_t r = 0; r < MR; ++r)
    for (std::size_t v = 0; v < 2; ++v) {
      float* out = c + (n + r) * ldc + j + 8 * v;
      const __m256 sum = store == OuterStore::add ? _mm256_add_ps(load8_avx2(out, whole, mask[v]), acc[r][v]) : acc[r][v];
      if (whole)
        _mm256_storeu_ps(out, sum);
      else
        _mm256_maskstore_ps(out, mask[v], sum);
    }
}
#endif
#ifdef CAUSALQWEN_BF16_KERNEL

/// The AVX512-BF16 outer-product kernel: rows [n, n + MR) × columns [j, j + outer_cols) of C.
template <std::size_t MR>
CAUSALQWEN_TARGET_BF16 void outer_tile_avx512(const std::uint32_t* a, PairStrides as, const std::uint32_t* b,
                                              std::size_t ldb_pairs, std::size_t P, std::size_t n, std::size_t j,
                                              std::size_t cols, float* c, std::size_t ldc, OuterStore store) {
  // the loops over rows and vectors are unrolled throughout, so that acc stays in registers
  __mmask16 valid[outer_vectors];  // the tile's columns that exist, per vector
#pragma GCC unroll 4
  for (std::size_t v = 0; v < outer_vectors; ++v) valid[v] = j + 16 * v < cols ? first_lanes(cols - j - 16 * v) : __mmask16(0);
  __m512 acc[MR][outer_vectors];
#pragma GCC unroll 6
  for (std::size_t r = 0; r < MR; ++r) {
    // C's lines of this tile, requested now so that they arrive while the sums run
    for (std::size_t v = 0; v < outer_vectors && j + 16 * v < cols; ++v) __builtin_prefetch(c + (n + r) * ldc + j + 16 * v, 1, 3);
#pragma GCC unroll 4
    for (std::size_t v = 0; v < outer_vectors; ++v)
      acc[r][v] = store == OuterStore::resume ? _mm512_maskz_loadu_ps(valid[v], c + (n + r) * ldc + j + 16 * v) : _mm512_setzero_ps();
  }
  for (std::size_t p = 0; p < P; ++p) {
    const std::uint32_t* bp = b + p * ldb_pairs + j;
    __m512bh bv[outer_vectors];
    for (std::size_t v = 0; v < outer_vectors; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bp + 16 * v);
    const std::uint32_t* ap = a + p * as.p_stride + n * as.row_stride;
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r * as.row_stride]));
#pragma GCC unroll 4
      for (std::size_t v = 0; v < outer_vectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, bv[v]);
    }
  }
#pragma GCC unroll 6
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < outer_vectors; ++v) {  // a vector past C's columns has no lanes: no access
      float* out = c + (n + r) * ldc + j + 16 * v;
      _mm512_mask_storeu_ps(out, valid[v],
                            store == OuterStore::add ? _mm512_add_ps(_mm512_maskz_loadu_ps(valid[v], out), acc[r][v]) : acc[r][v]);
    }
}
#endif

/// Calls tile(rows, n, j) for the tiles of C's rows [n0, n1) × columns [0, cols): TileCols wide,
/// outer_rows high (rows, an std::integral_constant, holds the tile's height: fewer at the end),
/// `next` prefetching a little before each.
template <std::size_t TileCols, class Tile>
void for_each_outer_tile(std::size_t n0, std::size_t n1, std::size_t cols, Prefetcher* next, Tile&& tile) {
  using std::integral_constant;
  for (std::size_t j = 0; j < cols; j += TileCols)
    for (std::size_t n = n0; n < n1; n += outer_rows) {
      if (next) next->prefetch_some();
      switch (std::min(outer_rows, n1 - n)) {
        case 1: tile(integral_constant<std::size_t, 1>{}, n, j); break;
        case 2: tile(integral_constant<std::size_t, 2>{}, n, j); break;
        case 3: tile(integral_constant<std::size_t, 3>{}, n, j); break;
        case 4: tile(integral_constant<std::size_t, 4>{}, n, j); break;
        case 5: tile(integral_constant<std::size_t, 5>{}, n, j); break;
        default: tile(integral_constant<std::size_t, outer_rows>{}, n, j); break;
      }
    }
}

/// Rows [n0, n1) of C on AVX512-BF16's kernel or (any other `isa`) the portable loop, over P pairs.
inline void outer_rows_of(Bf16Isa isa, const std::uint32_t* a, PairStrides as, const std::uint32_t* b, std::size_t ldb_pairs,
                          std::size_t P, std::size_t n0, std::size_t n1, std::size_t cols, float* c, std::size_t ldc,
                          OuterStore store, Prefetcher* next = nullptr) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (isa == Bf16Isa::avx512_bf16)
    return for_each_outer_tile<outer_cols>(n0, n1, cols, next, [&](auto rows, std::size_t n, std::size_t j) {
      outer_tile_avx512<decltype(rows)::value>(a, as, b, ldb_pairs, P, n, j, cols, c, ldc, store);
    });
#endif
  outer_portable(a, as, b, ldb_pairs, P, n0, n1, cols, c, ldc, store);
}

/// Rows [n0, n1) of C on the AVX2 kernel, over the K2 = 2P rows of split pairs.
inline void outer_rows_of([[maybe_unused]] Bf16Isa isa, [[maybe_unused]] const float* a, [[maybe_unused]] PairStrides as,
                          [[maybe_unused]] const float* b, [[maybe_unused]] std::size_t ldb, [[maybe_unused]] std::size_t K2,
                          [[maybe_unused]] std::size_t n0, [[maybe_unused]] std::size_t n1, [[maybe_unused]] std::size_t cols,
                          [[maybe_unused]] float* c, [[maybe_unused]] std::size_t ldc, [[maybe_unused]] OuterStore store,
                          [[maybe_unused]] Prefetcher* next = nullptr) {
#ifdef CAUSALQWEN_BF16_KERNEL
  for_each_outer_tile<outer_cols_avx2>(n0, n1, cols, next, [&](auto rows, std::size_t n, std::size_t j) {
    outer_tile_avx2<decltype(rows)::value>(a, as, SplitRowsB{b, ldb}, K2, n, j, cols, c, ldc, store);
  });
#endif
}

}  // namespace causalqwen::linalg::detail_bf16
