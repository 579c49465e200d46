/// The product of a linear layer whose weights are a bf16 copy (packed_weight.hpp), computed in
/// bf16 with float sums, for any number of rows (a prefill of S tokens or one decoding step):
///   Y [M,N] = bf16(X) [M,K] · Wᵀ (+ b)
/// X is rounded to bf16 (nearest, ties to even) once per call; every product of two bf16
/// numbers is exact in float, and each output's sum runs in a fixed order that depends on K
/// alone, never on M, the row's place in X or the thread count: K is cut into chunks of 16
/// (zero-padded), and lane j ∈ [0,8) of a row's accumulator takes the pairs (2j, 2j+1) of
/// every chunk in turn, in the order AVX512-BF16's vdpbf16ps adds them,
///   l_j ← (l_j + x_{2j+1}·w_{2j+1}) + x_{2j}·w_{2j}
/// then  y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)) (+ b).
/// On a CPU with AVX512-BF16 (checked at run time) each chunk of four W rows costs two
/// vdpbf16ps per row of X (32 multiply-adds each: twice the float FMA rate). On a CPU with AVX2
/// and FMA instead, X's rows are widened to float once per call with each chunk's odd values
/// first, and a W row's chunk is split in registers into its odd and even values as floats (a
/// mask and a shift), so that lane j takes the same two steps as two FMAs; from 24 rows of X on,
/// each lane's sums are a float product of their own instead, run on the float GEMM's tile, and
/// the lanes are added afterwards (multiply_lanes). Elsewhere a portable loop computes the same
/// sums in the same order. All give the same bits, except that
/// vdpbf16ps flushes subnormal inputs and results to zero and an FMA rounds a product below
/// float's normal range (|x·w| < 2⁻¹²⁶, where bf16 products stop being exact) together with the
/// sum.
/// An int8 copy of W (q ∈ [−127, 127], each a bf16 value exactly) goes through the same kernels
/// for many rows of X, each task widening its rows of q to bf16 first: y = s ⊙ (bf16(X)·Qᵀ) + b
/// (int8_rows_linear_forward), its sums as above.
/// The same kernels serve mixed-precision training (bf16_matmul: both operands rounded per call)
/// for X·Wᵀ; dYᵀ·X (whose sums run over the tokens) and dY·W (whose W holds the sum's index in
/// its rows) run on an outer-product kernel with its own fixed order, described below (AVX512-BF16,
/// AVX2 or the portable loop: the same bits again). Call outside your own `omp parallel` regions
/// (it then runs serially).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/int8_dot.hpp"
#include "causalqwen/linalg/kernel_choice.hpp"
#include "causalqwen/linalg/kernels/onednn.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/precision.hpp"
#include "causalqwen/linalg/prefetcher.hpp"
#include "causalqwen/linalg/transpose16.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_BF16_KERNEL 1
#endif

namespace causalqwen::linalg {

/// The instruction set the bf16 products run on: AVX512-BF16's vdpbf16ps, AVX2 with FMA (bf16
/// values widened to float, two FMAs for each of vdpbf16ps's pairs), or the portable loop.
enum class Bf16Isa { avx512_bf16, avx2, portable };

namespace detail_bf16 {

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

/// Whether this CPU runs vdpbf16ps (asked once).
inline bool cpu_has_avx512_bf16() {
#ifdef CAUSALQWEN_BF16_KERNEL
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}

/// y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)): a row's eight lane sums, in the kernel's order.
inline float lane_sum(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/// GCC 12's loop vectoriser at -O3 miscompiles the portable kernel below (with three chunks
/// of ones a row sums to 56, not 48), so that one function is compiled without it.
#if defined(__GNUC__) && !defined(__clang__)
#define CAUSALQWEN_NO_LOOP_VECTORIZE __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define CAUSALQWEN_NO_LOOP_VECTORIZE
#endif

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
/// from w_group, each lane and sum in the order of the file comment.
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

#ifdef CAUSALQWEN_BF16_KERNEL
#define CAUSALQWEN_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

/// bf16 (nearest even; NaN stays a quiet NaN) of 16 floats: float_to_bf16, 16 at a time, in
/// integer arithmetic.
CAUSALQWEN_TARGET_BF16 inline __m256i round16_integer(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                                 _mm512_set1_epi32(0x7F800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

/// Whether any of the floats is subnormal (vfpclassps, category 0x20).
CAUSALQWEN_TARGET_BF16 inline bool any_subnormal(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x20) != 0; }

/// round16_integer's bits in one instruction, vcvtneps2bf16: it rounds to nearest even and
/// quiets a NaN as float_to_bf16 does, but reads a subnormal float as a zero of its sign, so a
/// vector holding one (rare: |x| < 2⁻¹²⁶) takes the integer rounding instead.
CAUSALQWEN_TARGET_BF16 inline __m256i round16(__m512 v) {
  if (any_subnormal(v)) [[unlikely]]
    return round16_integer(v);
  return (__m256i)_mm512_cvtneps_pbh(v);
}

/// Lanes [0, n) set (n ≤ 16).
inline __mmask16 first_lanes(std::size_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

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
#endif

/// X's rows for the AVX2 kernel, xs [M, Kp]: chunk c of row m holds the bf16 values of
/// x_{16c}, …, x_{16c+15} widened to float (exact), the odd ones first,
///   [x₁, x₃, …, x₁₅, x₀, x₂, …, x₁₄]   (0 past K),
/// so that its two halves meet the odd and even weights of a W row's chunk lane by lane.
/// x_mk at x[m·ld + k], or at x[k·ld + m] when `transposed`.
inline void pack_split_rows(const float* x, std::size_t ld, bool transposed, std::size_t M, std::size_t K, std::size_t Kp,
                            float* xs) {
  const auto rounded = [&](std::size_t m, std::size_t k) {
    return k < K ? bf16_to_float(float_to_bf16(transposed ? x[k * ld + m] : x[m * ld + k])) : 0.0f;
  };
  parallel_for(M, M * Kp, [&](std::size_t m) {
    for (std::size_t c = 0; c < Kp / panel_cols; ++c)
      for (std::size_t j = 0; j < panel_cols / 2; ++j) {
        xs[m * Kp + c * panel_cols + j] = rounded(m, c * panel_cols + 2 * j + 1);
        xs[m * Kp + c * panel_cols + panel_cols / 2 + j] = rounded(m, c * panel_cols + 2 * j);
      }
  });
}

#ifdef CAUSALQWEN_BF16_KERNEL
#define CAUSALQWEN_TARGET_AVX2 __attribute__((target("avx2,fma")))

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
#endif

/// The kernel for bf16 rows of X: the portable loop, or AVX512-BF16's when `isa` says so.
inline void tile(Bf16Isa isa, const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group,
                 std::size_t G, const TileOut& o) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (isa == Bf16Isa::avx512_bf16)
    return G == 1 ? tile_avx512_rows<1>(xb, Kp, mr, w_group, o) : tile_avx512_rows<2>(xb, Kp, mr, w_group, o);
#endif
  (void)isa;
  tile_portable(xb, Kp, mr, w_group, G, o);
}

/// The kernel for rows of X split by pack_split_rows: AVX2's, mr ∈ [1, 3] rows × one panel group
/// over `chunks` chunks (K in blocks when `lanes` has some), or one row over all of K.
inline void tile([[maybe_unused]] const float* xs, [[maybe_unused]] std::size_t Kp, [[maybe_unused]] std::size_t chunks,
                 [[maybe_unused]] std::size_t mr, [[maybe_unused]] const std::uint16_t* w_group,
                 [[maybe_unused]] const TileOut& o, [[maybe_unused]] const TileLanes& lanes) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (mr == 1 && !lanes.at) return tile_avx2_row(xs, Kp, w_group, o);
  switch (mr) {
    case 1: return tile_avx2<1>(xs, Kp, chunks, w_group, o, lanes);
    case 2: return tile_avx2<2>(xs, Kp, chunks, w_group, o, lanes);
    default: return tile_avx2<3>(xs, Kp, chunks, w_group, o, lanes);
  }
#endif
}

/// Where a packer puts the 16 bf16 values of chunk c (contraction indices [16c, 16c+16)) of
/// row j: rows of Kp (`rows`: the X side) or panels (the W side, panel_index).
enum class PackLayout { rows, panels };
inline std::uint16_t* chunk_at(std::uint16_t* dst, PackLayout layout, std::size_t j, std::size_t c, std::size_t Kp) {
  return dst + (layout == PackLayout::rows ? j * Kp + c * panel_cols : panel_index(j, c * panel_cols, Kp));
}

/// dst ← bf16 of the matrix R [rows, K] (row j, contraction k) read from src with leading
/// dimension ld: R_jk = src[j·ld + k] (`transposed` false) or src[k·ld + j] (true); every
/// chunk zero-padded past K, and (panels) the rows of the last group past `rows` zero.
inline void pack_portable(const float* src, std::size_t ld, bool transposed, std::size_t rows, std::size_t K,
                          std::size_t Kp, PackLayout layout, std::uint16_t* dst) {
  const std::size_t chunks = Kp / panel_cols;
  const std::size_t padded_rows = layout == PackLayout::panels ? (rows + panel_rows - 1) / panel_rows * panel_rows : rows;
  parallel_for((padded_rows + 15) / 16, padded_rows * Kp, [&](std::size_t block) {
    for (std::size_t j = block * 16; j < std::min(padded_rows, block * 16 + 16); ++j)
      for (std::size_t c = 0; c < chunks; ++c) {
        std::uint16_t* out = chunk_at(dst, layout, j, c, Kp);
        for (std::size_t t = 0; t < panel_cols; ++t) {
          const std::size_t k = c * panel_cols + t;
          out[t] = j < rows && k < K ? float_to_bf16(transposed ? src[k * ld + j] : src[j * ld + k]) : std::uint16_t{0};
        }
      }
  });
}

#ifdef CAUSALQWEN_BF16_KERNEL
/// pack_portable's rows [j0, j1) (j1 − j0 ≤ 16) with AVX-512 (the same bits): contiguous rows
/// are loaded 16 values at a time; transposed ones as 16×16 blocks, transposed in registers.
CAUSALQWEN_TARGET_BF16 inline void pack_block_avx512(const float* src, std::size_t ld, bool transposed, std::size_t rows,
                                                     std::size_t K, std::size_t Kp, PackLayout layout, std::uint16_t* dst,
                                                     std::size_t j0, std::size_t j1) {
  const std::size_t chunks = Kp / panel_cols;
  if (!transposed) {
    for (std::size_t j = j0; j < j1; ++j)
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t k = c * panel_cols;
        const __mmask16 valid = j < rows && k < K ? first_lanes(K - k) : __mmask16(0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(chunk_at(dst, layout, j, c, Kp)),
                            round16(_mm512_maskz_loadu_ps(valid, src + j * ld + k)));
      }
    return;
  }
  const __mmask16 columns = j0 < rows ? first_lanes(rows - j0) : __mmask16(0);  // R's rows j0.. are src's columns
  __m512 block[16];
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t k = c * panel_cols;
    for (std::size_t t = 0; t < 16; ++t)
      block[t] = k + t < K ? _mm512_maskz_loadu_ps(columns, src + (k + t) * ld + j0) : _mm512_setzero_ps();
    transpose16(block);
    for (std::size_t j = j0; j < j1; ++j)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(chunk_at(dst, layout, j, c, Kp)), round16(block[j - j0]));
  }
}

/// pack_portable with AVX-512, threaded over blocks of 16 rows.
inline void pack_avx512(const float* src, std::size_t ld, bool transposed, std::size_t rows, std::size_t K, std::size_t Kp,
                        PackLayout layout, std::uint16_t* dst) {
  const std::size_t padded_rows = layout == PackLayout::panels ? (rows + panel_rows - 1) / panel_rows * panel_rows : rows;
  parallel_for((padded_rows + 15) / 16, padded_rows * Kp, [&](std::size_t block) {
    pack_block_avx512(src, ld, transposed, rows, K, Kp, layout, dst, block * 16, std::min(padded_rows, block * 16 + 16));
  });
}
#endif

#ifdef CAUSALQWEN_BF16_KERNEL
/// bf16(v) as floats (the rounded value, its low 16 bits 0): float_to_bf16's rounding, 8 lanes
/// (nearest even; a NaN quieted, its sign and top payload kept).
CAUSALQWEN_TARGET_AVX2 inline __m256i round8_avx2(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  return _mm256_and_si256(_mm256_blendv_epi8(rounded, quiet, nan), _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
}

/// Lanes [0, n) of 8 set, as AVX2's masked loads and stores take them.
CAUSALQWEN_TARGET_AVX2 inline __m256i first_lanes_avx2(std::size_t n) {
  const int count = static_cast<int>(std::min<std::size_t>(n, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The 8 floats at `at`, all of them when `whole`, else the lanes `mask` sets (0 in the others).
/// (A function with the target attribute, not a lambda: GCC gives a lambda inside a target
/// function the translation unit's instruction set, and without -mavx2 the intrinsics then fail.)
CAUSALQWEN_TARGET_AVX2 inline __m256 load8_avx2(const float* at, bool whole, __m256i mask) {
  return whole ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, mask);
}

/// bf16(src[k]) for k < n (≤ 8), 0 past n: floats.
CAUSALQWEN_TARGET_AVX2 inline __m256 rounded8_avx2(const float* src, std::size_t n) {
  if (n == 0) return _mm256_setzero_ps();
  const __m256 v = n >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, first_lanes_avx2(n));
  return _mm256_castsi256_ps(round8_avx2(v));
}

/// pack_portable's rows [j0, j1) of a matrix stored as rows (not transposed) with AVX2 (the same
/// bits): 16 values rounded per chunk, their bf16 halves packed into 16-bit words.
CAUSALQWEN_TARGET_AVX2 inline void pack_block_avx2(const float* src, std::size_t ld, std::size_t rows, std::size_t K,
                                                   std::size_t Kp, PackLayout layout, std::uint16_t* dst, std::size_t j0,
                                                   std::size_t j1) {
  for (std::size_t j = j0; j < j1; ++j)
    for (std::size_t c = 0; c < Kp / panel_cols; ++c) {
      const std::size_t k = c * panel_cols, n = j < rows && k < K ? std::min(panel_cols, K - k) : 0;
      const __m256i low = _mm256_srli_epi32(_mm256_castps_si256(rounded8_avx2(src + j * ld + k, n)), 16);
      const __m256i high = _mm256_srli_epi32(_mm256_castps_si256(rounded8_avx2(src + j * ld + k + 8, n > 8 ? n - 8 : 0)), 16);
      // packus interleaves the 128-bit halves: [l0-3 h0-3 | l4-7 h4-7]; the permute puts them in order
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(chunk_at(dst, layout, j, c, Kp)),
                          _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), _MM_SHUFFLE(3, 1, 2, 0)));
    }
}

/// pack_portable with AVX2 for a matrix stored as rows, threaded over blocks of 16 rows (a
/// transposed one takes the portable loop).
inline void pack_avx2(const float* src, std::size_t ld, bool transposed, std::size_t rows, std::size_t K, std::size_t Kp,
                      PackLayout layout, std::uint16_t* dst) {
  if (transposed) return pack_portable(src, ld, transposed, rows, K, Kp, layout, dst);
  const std::size_t padded_rows = layout == PackLayout::panels ? (rows + panel_rows - 1) / panel_rows * panel_rows : rows;
  parallel_for((padded_rows + 15) / 16, padded_rows * Kp, [&](std::size_t block) {
    pack_block_avx2(src, ld, rows, K, Kp, layout, dst, block * 16, std::min(padded_rows, block * 16 + 16));
  });
}
#endif

/// pack_portable on the instruction set `isa`: AVX-512 (for AVX512-BF16), AVX2, or the loop.
inline void pack(Bf16Isa isa, const float* src, std::size_t ld, bool transposed, std::size_t rows, std::size_t K,
                 std::size_t Kp, PackLayout layout, std::uint16_t* dst) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (isa == Bf16Isa::avx512_bf16) return pack_avx512(src, ld, transposed, rows, K, Kp, layout, dst);
  if (isa == Bf16Isa::avx2) return pack_avx2(src, ld, transposed, rows, K, Kp, layout, dst);
#endif
  (void)isa;
  pack_portable(src, ld, transposed, rows, K, Kp, layout, dst);
}

/// The W side of a product: N rows of bf16 panels, packed already (`panels`: the first group),
/// or of int8 panels (`int8_panels`: the first group; each q ∈ [−127, 127] is a bf16 value
/// exactly), or the float matrix R [N, K] that pack() reads (src, ld, transposed). Each task
/// widens its own rows of int8 panels, or packs its own rows of R, just before it multiplies
/// them (in its cache, not through memory). `abs`: the product is with |W|, the packed panels'
/// values with their sign bits cleared, which each task copies so into its cache first.
struct PanelSource {
  const std::uint16_t* panels = nullptr;
  const float* src = nullptr;
  std::size_t ld = 0, K = 0;
  bool transposed = false;
  bool abs = false;
  const std::int8_t* int8_panels = nullptr;
};

/// dst[i] = |src[i]| for bf16 values: the sign bits cleared (vectorised by the compiler).
inline void copy_abs(const std::uint16_t* __restrict src, std::size_t n, std::uint16_t* __restrict dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<std::uint16_t>(src[i] & 0x7FFFu);
}

/// dst[i] = bf16(q[i]), exact for |q| < 256: the high half of the float's bits (vectorised by
/// the compiler).
inline void widen_int8(const std::int8_t* __restrict q, std::size_t n, std::uint16_t* __restrict dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(q[i])) >> 16);
}

/// The bf16 panels of W's rows [n0, n1) (n0 a multiple of 4) for a task on the calling thread:
/// the packed copy's own, |W| of them copied into `scratch`, int8 panels widened into `scratch`,
/// or R's rows rounded now into `scratch` (grown to per_task rows once per shape).
inline const std::uint16_t* task_group(Bf16Isa isa, const PanelSource& w, std::size_t n0, std::size_t n1, std::size_t Kp,
                                       std::size_t per_task, PageBuffer<std::uint16_t>& scratch) {
  if (w.int8_panels) {
    const std::size_t stored = ((n1 - n0 + panel_rows - 1) / panel_rows) * panel_rows * Kp;
    widen_int8(w.int8_panels + (n0 / panel_rows) * panel_rows * Kp, stored, scratch.grow(per_task * Kp));
    return scratch.data();
  }
  if (!w.panels) {
    pack(isa, w.transposed ? w.src + n0 : w.src + n0 * w.ld, w.ld, w.transposed, n1 - n0, w.K, Kp, PackLayout::panels,
         scratch.grow(per_task * Kp));
    return scratch.data();
  }
  const std::uint16_t* first_group = w.panels + (n0 / panel_rows) * panel_rows * Kp;
  if (!w.abs) return first_group;
  const std::size_t stored = ((n1 - n0 + panel_rows - 1) / panel_rows) * panel_rows * Kp;
  copy_abs(first_group, stored, scratch.grow(stored));  // |W| of this task's groups, in its cache
  return scratch.data();
}

/// c [M,N] (=|+=) the products of X's rows [M,Kp] with the N rows of `w`, each output in the
/// order of the file comment; written as out + bias (bias may be null: out + 0), or added to c
/// when `accumulate`. X's rows are bf16 (XRow = std::uint16_t: AVX512-BF16 or the portable loop,
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

/// On AVX2 a product of many rows runs as eight float products, one per lane of the file
/// comment's sums, on the float GEMM's 6 × 16 tile (f32_gemm.hpp), whose outputs are each one
/// chain of FMAs over k in order: lane j's sum l_j is exactly such a chain over K' = 2·Kp/16
/// values, the pairs of lane j chunk by chunk, odd value first,
///   l_j[m,n] = Σ_{k'} a_j[m,k']·b_j[k',n]  (one FMA chain),  a_j[m,2c] = x_{m,16c+2j+1}, a_j[m,2c+1] = x_{m,16c+2j},
/// and b_j likewise from W's rows; then y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)) (+ b). The
/// same bits as the dot-product tile (tile_avx2), whose twelve accumulators each take two
/// dependent FMAs per chunk and whose loads of X exceed its FMAs; the float tile's 12 chains
/// read one broadcast and two vectors per 12 FMAs.

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
/// the file comment's order, written as y + bias (bias may be null: y + 0), or c + y when
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
inline void require_copy_fits(WeightType type, const char* fn, TensorView<float, 2> y, TensorView<const float, 2> x,
                              const PackedRef& w, TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows;
  detail::require(w.type == type, fn, "W is {}, not {} {} copy", weight_type_name(w.type), type == WeightType::int8 ? "an" : "a",
                  weight_type_name(type));
  detail::require(w.cols == K, fn, "W [{},{}] does not match X {}", N, w.cols, shape_text(x.shape));
  detail::require(w.row0 % panel_rows == 0, fn, "W starts at row {} of its panels, not at a multiple of 4", w.row0);
  require_shape(y, {M, N}, fn, "Y");
  if (!b.empty()) require_shape(b, {N}, fn, "b");
}

/// Y = bf16(X)·Wᵀ (+ b) on the instruction set `isa` (which the CPU must have): the same sums.
inline void forward(Bf16Isa isa, TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                    TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows, Kp = w.cols_padded;
  require_copy_fits(WeightType::bf16, "bf16_linear_forward", y, x, w, b);
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
  require_copy_fits(WeightType::int8, "int8_rows_linear_forward", y, x, w, b);
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

// ---- products whose two operands both hold the sum's index in their rows: C = Aᵀ·B (dW = dYᵀ·X)
// Their sums are short (K = the tokens of a batch) and C is large: an outer-product kernel keeps
// 16 outputs per accumulator and needs no lane sums at the end. Each output sums the pairs
// (2p, 2p+1) of K in turn, as vdpbf16ps adds them:  c ← (c + a_{2p+1}·b_{2p+1}) + a_{2p}·b_{2p}.

// On AVX2 the pairs are split instead: pair p becomes two float rows, k' = 2p holding the bf16
// values of row 2p+1 and k' = 2p+1 those of row 2p (widened, exact), and each output sums its
// terms over k' in turn, one FMA each (the products are exact): the same order, the same bits.

/// Output rows and 16-column vectors per tile of the outer-product kernel.
inline constexpr std::size_t outer_rows = 6, outer_vectors = 4, outer_cols = 16 * outer_vectors;
/// Output columns (two vectors of 8) per tile of the AVX2 outer-product kernel, outer_rows high:
/// 12 accumulators, the two vectors of B's row and a broadcast of A's value in the other registers.
inline constexpr std::size_t outer_cols_avx2 = 16;
/// Rows of C per task.
inline constexpr std::size_t outer_rows_per_task = 24;

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

/// 8 bf16 values at `words`, their bits and-ed with value_bits (0x7FFF each: |values|), as floats.
CAUSALQWEN_TARGET_AVX2 inline __m256 widen8_avx2(const std::uint16_t* words, __m128i value_bits) {
  const __m128i bits = _mm_and_si128(value_bits, _mm_loadu_si128(reinterpret_cast<const __m128i*>(words)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
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

/// The rows of a product's operand as an outer-product kernel reads them: pairs (32-bit words,
/// one row per pair) for AVX512-BF16's kernel and the portable loop, or split pairs (floats, two
/// rows per pair) for AVX2's.
template <class Word>
inline constexpr std::size_t rows_per_pair = std::is_same_v<Word, float> ? 2 : 1;

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

/// C [N, cols] (+)= bf16(A)ᵀ·bf16(B): A [K, N] (lda), B [K, cols] (ldb), row-major, the sum
/// over their rows in the order above; on `isa`'s kernel, whose operands are pairs or (AVX2)
/// split pairs (Word).
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
/// pairs of K in turn as above. A's rows rounded to bf16 are its pairs already; B's rows are
/// paired block by block inside each task (a task: some columns of C and every row), so B is read
/// once, row by row, with no transposing. The blocks' sums run in a per-task buffer, each block
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

/// C [M,N] (+)= bf16(op(A))·bf16(op(B)): op(A) [M,K], op(B) [K,N], both rounded to bf16 once
/// per call: op(A) into a per-thread buffer (grown once per shape), op(B) task by task inside
/// `multiply`; then the sums of `multiply`. Aᵀ·B and A·B (B stored with K as its rows) run on
/// the outer-product kernel instead, with its order of the sums. `b_panels` (optional): a bf16 copy
/// of B in panels, of op(B)ᵀ [N,K] for A·Bᵀ or of B [K,N] for A·B, read instead of rounding B
/// (the same bits); `b_abs`: B holds |the copy's values| (the sign bits cleared); `b_panel_cols`
/// (A·B only): the panels' row length, when longer than N rounded up to 16.
inline void matmul(Bf16Isa isa, bool a_transposed, bool b_transposed, std::size_t M, std::size_t N, std::size_t K,
                   const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                   const std::uint16_t* b_panels = nullptr, bool b_abs = false, std::size_t b_panel_cols = 0) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = 0, or C unchanged
    if (!accumulate)
      for (std::size_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
    return;
  }
  if (a_transposed && !b_transposed)
    return isa == Bf16Isa::avx2 ? outer_product<float>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate)
                                : outer_product<std::uint32_t>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate);
  if (!a_transposed && !b_transposed)
    return isa == Bf16Isa::avx2
               ? row_outer_product<float>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_panels, b_abs, b_panel_cols)
               : row_outer_product<std::uint32_t>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_panels, b_abs,
                                                  b_panel_cols);
  const std::size_t Kp = (K + panel_cols - 1) / panel_cols * panel_cols;
  // the panels' row j is column j of op(B): stored as row j when B is transposed
  const PanelSource panels{b_transposed ? b_panels : nullptr, b, ldb, K, !b_transposed, b_transposed && b_abs};
  multiply_x(isa, a, lda, a_transposed, M, K, Kp, panels, N, c, ldc, accumulate, nullptr);
}

}  // namespace detail_bf16

/// Which kernels the bf16 products run. `automatic` (the default): a product of many rows
/// (onednn_min_rows, kernels/onednn_bf16.hpp) on oneDNN's matmul where the library is built
/// with oneDNN and oneDNN runs AMX on this CPU, everything else on the fastest of our own
/// kernels this CPU has (AVX512-BF16, else AVX2 with FMA). `onednn`: the products of many rows on
/// oneDNN whatever kernels it runs here (its AVX-512 ones without AMX; built with oneDNN only),
/// the rest as `automatic`. `own`: our fastest kernels only, never oneDNN. `avx2`: our AVX2
/// kernels even on a CPU with AVX512-BF16, and `portable`: the portable loop everywhere (the
/// same sums), both never oneDNN (for tests and comparisons).
enum class Bf16Kernel { automatic, avx2, portable, onednn, own };

/// Sets the kernel of every later bf16 product in this process.
inline void set_bf16_kernel(Bf16Kernel k) {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  detail::require(k != Bf16Kernel::onednn || onednn::bf16_supported(), "set_bf16_kernel",
                  "oneDNN makes no bf16 matmul on this CPU (its bf16 kernels need AVX-512 or AMX); choose auto, own, "
                  "avx2 or portable");
#endif
  kernel_choice<Bf16Kernel>() = k;
}

/// Whether the bf16 products of many rows can run on oneDNN here: built with it, and oneDNN
/// makes a bf16 matmul on this CPU (what set_bf16_kernel(Bf16Kernel::onednn) requires).
inline bool onednn_runs_bf16() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  return onednn::bf16_supported();
#else
  return false;
#endif
}

/// "auto", "onednn", "own", "avx2" or "portable" → the choice; anything else is refused with
/// the accepted names.
inline Bf16Kernel parse_bf16_kernel(std::string_view s) {
  if (s == "auto") return Bf16Kernel::automatic;
  if (s == "onednn") return Bf16Kernel::onednn;
  if (s == "own") return Bf16Kernel::own;
  if (s == "avx2") return Bf16Kernel::avx2;
  if (s == "portable") return Bf16Kernel::portable;
  throw DomainError("causalqwen::parse_bf16_kernel: unknown bf16 kernel '" + std::string(s) +
                    "': expected auto, onednn, own, avx2 or portable");
}

/// The instruction set our own bf16 products run on now (those that oneDNN does not run).
inline Bf16Isa bf16_kernel_isa() {
  const Bf16Kernel choice = kernel_choice<Bf16Kernel>();
  if (choice == Bf16Kernel::onednn || choice == Bf16Kernel::own) {
    if (detail_bf16::cpu_has_avx512_bf16()) return Bf16Isa::avx512_bf16;
    return cpu_has_avx2_fma() ? Bf16Isa::avx2 : Bf16Isa::portable;
  }
  return kernel_isa<Bf16Kernel>(detail_bf16::cpu_has_avx512_bf16(), Bf16Isa::avx512_bf16);
}

/// Whether the bf16 products of many rows run on oneDNN now: built with it, and the choice
/// `onednn`, or `automatic` on a CPU where oneDNN runs AMX.
inline bool bf16_products_on_onednn() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  const Bf16Kernel choice = kernel_choice<Bf16Kernel>();
  return choice == Bf16Kernel::onednn || (choice == Bf16Kernel::automatic && onednn::has_amx());
#else
  return false;
#endif
}

/// Whether the bf16 products run one of their instruction-set kernels now (oneDNN's,
/// AVX512-BF16 or AVX2).
inline bool bf16_kernel_is_hardware() { return bf16_products_on_onednn() || bf16_kernel_isa() != Bf16Isa::portable; }

/// "AVX512-BF16", "AVX2" or "portable": what our own bf16 kernels run on now (decoding's few
/// rows, and every product when oneDNN runs none).
inline const char* bf16_own_kernel_name() {
  switch (bf16_kernel_isa()) {
    case Bf16Isa::avx512_bf16: return "AVX512-BF16";
    case Bf16Isa::avx2: return "AVX2";
    default: return "portable";
  }
}

/// What the bf16 products of many rows (a prefill, a training step) run on now: oneDNN's
/// kernel ("AMX-BF16 (oneDNN)", "AVX512-BF16 (oneDNN)", …: kernels/onednn.hpp) or our own
/// (bf16_own_kernel_name).
inline std::string bf16_kernel_name() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (bf16_products_on_onednn()) return onednn::bf16_kernel_name();
#endif
  return bf16_own_kernel_name();
}

/// Y = bf16(X)·Wᵀ (+ b):  X [M,K], W [N,K] a bf16 copy (its first row at a multiple of 4 in
/// its panels), b [N] (optional), Y [M,N]. AVX512-BF16 or AVX2 when this CPU has it (checked at
/// run time), else the portable loop with the same sums.
inline void bf16_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                TensorView<const float, 1> b = {}) {
  detail_bf16::forward(bf16_kernel_isa(), y, x, w, b);
}

/// Whether a product of more than few_rows_max rows with an int8 copy of W runs on the bf16
/// product (int8_rows_linear_forward): when the int8 choice is automatic and the bf16 products
/// run on AVX512-BF16, where the bf16 product has twice the float FMA rate. Elsewhere (or with
/// set_int8_kernel(avx2 | portable)) such a product runs the float GEMM over the float matrix,
/// which holds q·s.
inline bool int8_rows_on_bf16() {
  return kernel_choice<Int8Kernel>() == Int8Kernel::automatic && bf16_kernel_isa() == Bf16Isa::avx512_bf16;
}

/// Y = s ⊙ (bf16(X)·Qᵀ) (+ b):  X [M,K], W [N,K] an int8 copy (w_nk = q_nk·s_n; its first row at
/// a multiple of 4 in its panels), b [N] (optional), Y [M,N]. X is rounded to bf16 once, each
/// q_nk is a bf16 value exactly, and each output is the bf16 product's sum (bf16_linear_forward's
/// order, every product exact) times s_n, plus b_n: a row's bits independent of M. On the bf16
/// kernel this CPU has (AVX512-BF16, AVX2 or the portable loop: the same bits).
inline void int8_rows_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                     TensorView<const float, 1> b = {}) {
  detail_bf16::forward_int8(bf16_kernel_isa(), y, x, w, b);
}

/// C [M,N] = bf16(op(A))·bf16(op(B)) (+ C when `accumulate`), row-major with leading
/// dimensions lda, ldb, ldc, as linalg::matmul takes them: both operands rounded to bf16
/// (nearest even) once per call, every product exact, each output summed in float in an order
/// that depends on K alone (the file comment's; for Aᵀ·B, the outer-product kernel's). The
/// products of mixed-precision training. `b_copy` (optional; ignored unless it is a bf16 copy):
/// B's values in bf16 already, read instead of rounding B again, with the same results: the copy
/// of W [N,K] for X·Wᵀ (op_b transposed), or of W [K,N] for dY·W (op_b plain), its first row at a
/// multiple of 4 of its panels; B's floats are then not read (b may be null). A copy read as |W|
/// (PackedRef::abs) gives the products with |W|. For dY·W the copy's rows may be longer than N
/// (cols_padded: a store of more columns, of which B is the first N, as a KV cache's keys).
/// A copy in rows (PackedRef::rows_layout, for oneDNN) is widened to floats first (the same values).
inline void bf16_matmul(Op op_a, Op op_b, std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                        const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                        const PackedRef& b_copy = {}) {
  if (b_copy.type == WeightType::bf16 && b_copy.rows_layout) {  // widened to floats, which round back to the same values
    thread_local PageBuffer<float> widened;  // [copy rows, cols]
    const std::size_t rows = b_copy.rows, cols = b_copy.cols, ld_copy = b_copy.cols_padded;
    const std::uint16_t* src = b_copy.bf16 + b_copy.row0 * ld_copy;
    const std::uint16_t mask = b_copy.abs ? 0x7FFF : 0xFFFF;
    float* out = widened.grow(rows * cols);
    parallel_for(rows, rows * cols, [&](std::size_t r) {
      for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = bf16_to_float(static_cast<std::uint16_t>(src[r * ld_copy + c] & mask));
    });
    return bf16_matmul(op_a, op_b, M, N, K, a, lda, out, cols, c, ldc, accumulate);
  }
  const std::uint16_t* b_panels = nullptr;
  if (b_copy.type == WeightType::bf16 && op_a == Op::plain) {
    const bool transposed = op_b == Op::transposed;
    const std::size_t padded = (b_copy.cols + panel_cols - 1) / panel_cols * panel_cols;
    detail::require(b_copy.rows == (transposed ? N : K) && b_copy.cols == (transposed ? K : N) && b_copy.row0 % panel_rows == 0 &&
                        b_copy.cols_padded % panel_cols == 0 && (transposed ? b_copy.cols_padded == padded : b_copy.cols_padded >= padded),
                    "bf16_matmul", "the bf16 copy [{},{}] (first row {}, rows of {} in its panels) is not B {} starting at a multiple of 4",
                    b_copy.rows, b_copy.cols, b_copy.row0, b_copy.cols_padded,
                    transposed ? shape_text(Shape<2>{N, K}) : shape_text(Shape<2>{K, N}));
    b_panels = b_copy.bf16 + b_copy.row0 * b_copy.cols_padded;
  }
  detail_bf16::matmul(bf16_kernel_isa(), op_a == Op::transposed, op_b == Op::transposed, M, N, K, a, lda, b, ldb,
                      c, ldc, accumulate, b_panels, b_copy.abs, b_panels ? b_copy.cols_padded : 0);
}

}  // namespace causalqwen::linalg
