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
/// vdpbf16ps per row of X (32 multiply-adds each: twice the float FMA rate); elsewhere a
/// portable loop computes the same sums in the same order (the same bits, except that the
/// instruction flushes subnormal inputs and results to zero).
/// Inference only; call outside your own `omp parallel` regions (it then runs serially).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_BF16_KERNEL 1
#endif

namespace causalqwen::linalg {

namespace detail_bf16 {

/// Rows of X per micro-tile; panel groups of 4 W rows per micro-tile: 2 (6 × 8 outputs, 24
/// accumulators), or 1 when X has at most 2 rows (a decoding step, bound by reading W: one
/// group at a time reads the panels as one sequential stream, which measured 1.2× faster than
/// two streams and 1.5× faster than four on a 140 MB matrix here).
inline constexpr std::size_t tile_rows = 6, tile_groups = 2, few_rows_tile_groups = 1;
/// W rows handed to one task of the thread split (a multiple of 8).
inline constexpr std::size_t rows_per_task = 64;
/// Bytes of bf16 X that one block of rows may take (kept in the core's L2 while W streams).
inline constexpr std::size_t x_block_bytes = 192 * 1024;

/// Whether this CPU runs vdpbf16ps (asked once).
inline bool cpu_has_avx512_bf16() {
#ifdef CAUSALQWEN_BF16_KERNEL
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
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

/// xb [M, Kp] ← bf16(x [M,K]), each row zero-padded to Kp (a multiple of 16).
inline void round_rows_portable(const float* x, std::size_t M, std::size_t K, std::size_t Kp, std::uint16_t* xb) {
  parallel_for(M, M * K, [&](std::size_t m) {
    for (std::size_t k = 0; k < K; ++k) xb[m * Kp + k] = float_to_bf16(x[m * K + k]);
    std::fill(xb + m * Kp + K, xb + (m + 1) * Kp, std::uint16_t{0});
  });
}

/// GCC 12's loop vectoriser at -O3 miscompiles the portable kernel below (with three chunks
/// of ones a row sums to 56, not 48), so that one function is compiled without it.
#if defined(__GNUC__) && !defined(__clang__)
#define CAUSALQWEN_NO_LOOP_VECTORIZE __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define CAUSALQWEN_NO_LOOP_VECTORIZE
#endif

/// The portable kernel: out[m][i] for rows [g0·4, g0·4 + 4·G) of the panels and rows
/// [0, mr) of xb, each lane and sum in the order of the file comment.
CAUSALQWEN_NO_LOOP_VECTORIZE inline void tile_portable(const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group,
                          std::size_t G, float* out /* [mr][4·G] */) {
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
        out[m * panel_rows * G + g * panel_rows + r] = lane_sum(l);
      }
}

#ifdef CAUSALQWEN_BF16_KERNEL
#define CAUSALQWEN_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))

/// out [Kp] ← bf16(row [K]) with AVX-512: float_to_bf16 (nearest even; NaN stays a quiet NaN),
/// zero-padded.
CAUSALQWEN_TARGET_BF16 inline void round_row_avx512(const float* row, std::size_t K, std::size_t Kp, std::uint16_t* out) {
  for (std::size_t k = 0; k < Kp; k += 16) {
    const __mmask16 valid = k + 16 <= K ? __mmask16(0xFFFF) : k >= K ? __mmask16(0) : __mmask16((1u << (K - k)) - 1);
    const __m512i bits = _mm512_castps_si512(_mm512_maskz_loadu_ps(valid, row + k));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                                   _mm512_set1_epi32(0x7F800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet)));
  }
}

/// xb [M, Kp] ← bf16(x [M,K]), row by row with AVX-512 (a lambda does not take its caller's
/// target attribute, so the threads call a function that has it).
inline void round_rows_avx512(const float* x, std::size_t M, std::size_t K, std::size_t Kp, std::uint16_t* xb) {
  parallel_for(M, M * K, [&](std::size_t m) { round_row_avx512(x + m * K, K, Kp, xb + m * Kp); });
}

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

/// The AVX512-BF16 kernel: MR rows of xb × G groups of 4 W rows.
template <std::size_t MR, std::size_t G>
CAUSALQWEN_TARGET_BF16 void tile_avx512(const std::uint16_t* xb, std::size_t Kp, const std::uint16_t* w_group,
                                        float* out /* [MR][4·G] */) {
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
  for (std::size_t m = 0; m < MR; ++m)
    for (std::size_t g = 0; g < G; ++g)
      _mm_storeu_ps(out + m * panel_rows * G + g * panel_rows, four_sums(acc[m][2 * g], acc[m][2 * g + 1]));
}

/// tile_avx512 for a run-time row count mr ∈ [1, tile_rows].
template <std::size_t G>
void tile_avx512_rows(const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group, float* out) {
  switch (mr) {
    case 1: return tile_avx512<1, G>(xb, Kp, w_group, out);
    case 2: return tile_avx512<2, G>(xb, Kp, w_group, out);
    case 3: return tile_avx512<3, G>(xb, Kp, w_group, out);
    case 4: return tile_avx512<4, G>(xb, Kp, w_group, out);
    case 5: return tile_avx512<5, G>(xb, Kp, w_group, out);
    default: return tile_avx512<6, G>(xb, Kp, w_group, out);
  }
}
#endif

/// The kernel: the portable loop, or AVX512-BF16's when `hardware`.
inline void tile(bool hardware, const std::uint16_t* xb, std::size_t Kp, std::size_t mr, const std::uint16_t* w_group,
                 std::size_t G, float* out) {
#ifdef CAUSALQWEN_BF16_KERNEL
  if (hardware) return G == 1 ? tile_avx512_rows<1>(xb, Kp, mr, w_group, out) : tile_avx512_rows<2>(xb, Kp, mr, w_group, out);
#endif
  (void)hardware;
  tile_portable(xb, Kp, mr, w_group, G, out);
}

/// Y = bf16(X)·Wᵀ (+ b) on the portable loop or (when `hardware`, which needs
/// cpu_has_avx512_bf16()) on AVX512-BF16: the same sums.
inline void forward(bool hardware, TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                    TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows, Kp = w.cols_padded;
  detail::require(w.type == WeightType::bf16, "bf16_linear_forward", "W is {}, not a bf16 copy", weight_type_name(w.type));
  detail::require(w.cols == K, "bf16_linear_forward", "W [{},{}] does not match X {}", N, w.cols, shape_string(x.shape));
  detail::require(w.row0 % panel_rows == 0, "bf16_linear_forward", "W starts at row {} of its panels, not at a multiple of 4",
                  w.row0);
  require_shape(y, {M, N}, "bf16_linear_forward", "Y");
  if (!b.empty()) require_shape(b, {N}, "bf16_linear_forward", "b");
  if (M == 0 || N == 0) return;
  thread_local std::vector<std::uint16_t> xb;  // [M, Kp], grown once per shape
  if (xb.size() < M * Kp) xb.resize(M * Kp);
#ifdef CAUSALQWEN_BF16_KERNEL
  if (hardware)
    round_rows_avx512(x.data, M, K, Kp, xb.data());
  else
#endif
    round_rows_portable(x.data, M, K, Kp, xb.data());
  const std::uint16_t* x_bf16 = xb.data();  // (the tasks run on other threads: not their xb)
  const std::uint16_t* first_group = w.bf16 + (w.row0 / panel_rows) * panel_rows * Kp;
  const std::size_t block_rows = std::max(tile_rows, x_block_bytes / (2 * Kp) / tile_rows * tile_rows);
  const std::size_t tasks = (N + rows_per_task - 1) / rows_per_task;
  parallel_for(tasks, M * N * K / 8 + N * K, [&](std::size_t t) {
    const std::size_t n0 = t * rows_per_task, n1 = std::min(N, n0 + rows_per_task);
    const std::size_t groups = M <= 2 ? few_rows_tile_groups : tile_groups;
    float out[tile_rows * panel_rows * tile_groups];
    for (std::size_t m0 = 0; m0 < M; m0 += block_rows) {
      const std::size_t m_end = std::min(M, m0 + block_rows);
      for (std::size_t n = n0; n < n1; n += panel_rows * groups) {
        const std::size_t rows = std::min(panel_rows * groups, n1 - n);
        const std::size_t G = (rows + panel_rows - 1) / panel_rows, width = panel_rows * G;
        for (std::size_t m = m0; m < m_end; m += tile_rows) {
          const std::size_t mr = std::min(tile_rows, m_end - m);
          tile(hardware, x_bf16 + m * Kp, Kp, mr, first_group + (n / panel_rows) * panel_rows * Kp, G, out);
          for (std::size_t i = 0; i < mr; ++i)
            for (std::size_t r = 0; r < rows; ++r)
              y.data[(m + i) * N + n + r] = out[i * width + r] + (b.empty() ? 0.0f : b.data[n + r]);
        }
      }
    }
  });
}

}  // namespace detail_bf16

/// Which kernel bf16_linear_forward runs: AVX512-BF16's when this CPU has it (`automatic`, the
/// default), or the portable loop everywhere (`portable`: the same sums; for tests and
/// comparisons).
enum class Bf16Kernel { automatic, portable };

namespace detail_bf16 {
inline std::atomic<Bf16Kernel>& kernel_choice() {
  static std::atomic<Bf16Kernel> choice{Bf16Kernel::automatic};
  return choice;
}
}  // namespace detail_bf16

/// Sets the kernel of every later bf16_linear_forward in this process.
inline void set_bf16_kernel(Bf16Kernel k) { detail_bf16::kernel_choice() = k; }

/// Whether bf16_linear_forward runs on AVX512-BF16 now.
inline bool bf16_kernel_is_hardware() {
  return detail_bf16::kernel_choice() == Bf16Kernel::automatic && detail_bf16::cpu_has_avx512_bf16();
}

/// "AVX512-BF16" or "portable": what bf16_linear_forward runs on now.
inline const char* bf16_kernel_name() { return bf16_kernel_is_hardware() ? "AVX512-BF16" : "portable"; }

/// Y = bf16(X)·Wᵀ (+ b):  X [M,K], W [N,K] a bf16 copy (its first row at a multiple of 4 in
/// its panels), b [N] (optional), Y [M,N]. AVX512-BF16 when this CPU has it (checked at run
/// time), else the portable loop with the same sums.
inline void bf16_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                TensorView<const float, 1> b = {}) {
  detail_bf16::forward(bf16_kernel_is_hardware(), y, x, w, b);
}

}  // namespace causalqwen::linalg
