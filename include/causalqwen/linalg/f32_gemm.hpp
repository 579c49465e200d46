/// The library's own float product, C [M,N] = op(A)·op(B) (+ C), row-major, on AVX-512 or, on
/// CPUs without it, on AVX2 with FMA: every output is one chain of fused multiply-adds over k
/// in increasing order,
///   c ← C (when accumulating; else 0),  c ← fma(op(A)_mk, op(B)_kn, c)  for k = 0, 1, …, K−1,
/// so its bits depend on K and the operands alone: never on M, N, the output's place in C, the
/// blocking or the thread count (a row computed alone equals the same row of a whole product,
/// which decoding with a KV cache needs). The sum is stored in C between blocks of K and
/// resumed from it, which is exact.
/// The loops are those of BLIS: op(B) is packed block by block ([kc, nc], in panels of nr
/// columns; shared by the threads when they split C's rows, each thread's own when they split
/// its columns, and then no thread waits for another), op(A) in blocks of mc rows (panels of mr
/// rows, per thread), and the micro-kernel keeps an mr × nr tile of C in registers (AVX-512: 12 ×
/// 32 in 24 of its 32; AVX2: 6 × 16 in 12 of its 16) while a panel of B stays in L1 and A's block
/// in L2. Both kernels run the same chains, so they give the same bits; so does a portable loop
/// on any CPU (std::fma is exactly rounded), which is what tests compare the kernels with.
/// Call outside your own `omp parallel` regions (inside one, the product runs on the calling
/// thread).
#pragma once
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernel_choice.hpp"
#include "causalqwen/linalg/prefetcher.hpp"
#include "causalqwen/linalg/transpose16.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_F32_KERNEL 1
#endif

namespace causalqwen::linalg {

namespace detail_f32 {

/// The blocks: at most a kernel's `kc_max` values of k per packed panel (K is cut into equal
/// blocks, a multiple of 16, so a K within one block reads and writes C's tiles once), at most a
/// kernel's `mc` rows of A per block (mc × kc floats within L2), nc columns of B per shared block
/// (kc × nc floats, in L3).
inline constexpr std::size_t nc = 3072;
/// The depth of K's blocks: K cut into ⌈K / kc_max⌉ blocks of equal depth, rounded up to 16.
inline std::size_t k_block(std::size_t K, std::size_t kc_max) {
  const std::size_t blocks = (K + kc_max - 1) / kc_max;
  return std::min(kc_max, ((K + blocks - 1) / blocks + 15) / 16 * 16);
}
/// Products with fewer multiply-adds than this run on the calling thread.
inline constexpr double parallel_multiply_adds = 64.0 * 64.0 * 64.0;

/// Whether this CPU runs AVX-512F (transpose16.hpp's, asked once).
using linalg::cpu_has_avx512f;

/// Whether this CPU runs AVX2 and FMA (kernel_choice.hpp's, asked once).
using linalg::cpu_has_avx2_fma;

/// An operand read as stored (element (i, j) at p[i·ld + j]) or transposed (p[j·ld + i]).
struct Operand {
  const float* p;
  std::size_t ld;
  bool transposed;
  float at(std::size_t i, std::size_t j) const { return transposed ? p[j * ld + i] : p[i * ld + j]; }
};

/// The portable product: every output's chain in the order of the file comment.
inline void multiply_portable(const Operand& a, const Operand& b, std::size_t M, std::size_t N, std::size_t K, float* c,
                              std::size_t ldc, bool accumulate) {
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      float sum = accumulate ? c[m * ldc + n] : 0.0f;
      for (std::size_t k = 0; k < K; ++k) sum = std::fma(a.at(m, k), b.at(k, n), sum);
      c[m * ldc + n] = sum;
    }
}

#ifdef CAUSALQWEN_F32_KERNEL
#define CAUSALQWEN_TARGET_F32_GEMM __attribute__((target("avx512f")))

/// The AVX-512 kernel: tiles of 12 rows × 32 columns (two vectors of 16), blocks of 240 rows of
/// A by 512 values of k (480 KB, in a 1 MB L2), chosen by a sweep of both over the Qwen2.5-0.5B
/// and demo shapes (docs/performance/).
struct Avx512 {
  static constexpr std::size_t mr = 12, nr = 32, mc = 240, kc_max = 512;

  /// Lanes [0, n) set (n ≤ 16).
  static __mmask16 lanes(std::size_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

  /// Up to 16 rows turned into columns, 16 × 16 values at a time in registers:
  ///   dst[(k − k0)·stride + i] ← src[i·ld + k]  for k ∈ [k0, k1) and the lanes i in `store`,
  /// reading rows i < count (≤ 16) and 0 for the others.
  CAUSALQWEN_TARGET_F32_GEMM static void rows_to_columns(const float* src, std::size_t ld, std::size_t count, std::size_t k0,
                                                        std::size_t k1, float* dst, std::size_t stride, __mmask16 store) {
    __m512 block[16];
    for (std::size_t kb = k0; kb < k1; kb += 16) {
      const __mmask16 valid = lanes(k1 - kb);
      for (std::size_t i = 0; i < 16; ++i) block[i] = i < count ? _mm512_maskz_loadu_ps(valid, src + i * ld + kb) : _mm512_setzero_ps();
      transpose16(block);
      for (std::size_t t = 0; t < std::min<std::size_t>(16, k1 - kb); ++t) _mm512_mask_storeu_ps(dst + (kb - k0 + t) * stride, store, block[t]);
    }
  }

  /// A's panel [k1 − k0, mr] ← op(A)'s rows [m0, m0 + mr) (zero past M), columns [k0, k1).
  CAUSALQWEN_TARGET_F32_GEMM static void pack_a_panel(const Operand& a, std::size_t M, std::size_t m0, std::size_t k0, std::size_t k1,
                                                     float* dst) {
    const std::size_t rows = std::min(mr, M - m0);
    constexpr __mmask16 panel = __mmask16((1u << mr) - 1);
    if (a.transposed) {  // op(A)'s row m is A's column m: each k gives mr contiguous values
      const __mmask16 valid = lanes(rows);
      for (std::size_t k = k0; k < k1; ++k, dst += mr)
        _mm512_mask_storeu_ps(dst, panel, _mm512_maskz_loadu_ps(valid, a.p + k * a.ld + m0));
      return;
    }
    rows_to_columns(a.p + m0 * a.ld, a.ld, rows, k0, k1, dst, mr, panel);
  }

  /// The panels of op(A)'s rows [m_first, m_last), each [k1 − k0, mr] (zero past M), one after
  /// another from dst. Transposed A (op(A)'s row m is A's column m) is read eight rows of A at a
  /// time across the whole block: panel by panel, each value would come from a new row of A (a new
  /// page when A is wide), which neither the prefetcher nor the TLB follows.
  CAUSALQWEN_TARGET_F32_GEMM static void pack_a_block(const Operand& a, std::size_t M, std::size_t m_first, std::size_t m_last,
                                                     std::size_t k0, std::size_t k1, float* dst) {
    if (!a.transposed) {
      for (std::size_t m = m_first; m < m_last; m += mr) pack_a_panel(a, M, m, k0, k1, dst + (m - m_first) * (k1 - k0));
      return;
    }
    constexpr __mmask16 panel = __mmask16((1u << mr) - 1);
    constexpr std::size_t group = 8;
    const std::size_t kk = k1 - k0;
    for (std::size_t kg = k0; kg < k1; kg += group) {
      const std::size_t kg_end = std::min(k1, kg + group);
      float* out = dst + (kg - k0) * mr;
      for (std::size_t m = m_first; m < m_last; m += mr, out += kk * mr) {
        const __mmask16 valid = lanes(std::min(mr, M - m));
        for (std::size_t k = kg; k < kg_end; ++k)
          _mm512_mask_storeu_ps(out + (k - kg) * mr, panel, _mm512_maskz_loadu_ps(valid, a.p + k * a.ld + m));
      }
    }
  }

  /// B's panel [k1 − k0, nr] ← op(B)'s columns [n0, n0 + nr) (zero past N), rows [k0, k1).
  CAUSALQWEN_TARGET_F32_GEMM static void pack_b_panel(const Operand& b, std::size_t N, std::size_t n0, std::size_t k0, std::size_t k1,
                                                     float* dst) {
    const std::size_t cols = std::min(nr, N - n0);
    if (!b.transposed) {  // op(B)'s row k is B's row k: nr contiguous values each
      const __mmask16 low = lanes(cols), high = cols > 16 ? lanes(cols - 16) : __mmask16(0);
      for (std::size_t k = k0; k < k1; ++k, dst += nr) {
        const float* src = b.p + k * b.ld + n0;
        _mm512_store_ps(dst, _mm512_maskz_loadu_ps(low, src));
        _mm512_store_ps(dst + 16, _mm512_maskz_loadu_ps(high, src + 16));
      }
      return;
    }
    for (std::size_t half = 0; half < nr / 16; ++half)  // op(B)'s column n is B's row n
      rows_to_columns(b.p + (n0 + 16 * half) * b.ld, b.ld, cols > 16 * half ? std::min<std::size_t>(16, cols - 16 * half) : 0, k0,
                      k1, dst + 16 * half, nr, __mmask16(0xFFFF));
  }

  /// The micro-kernel: C's rows [0, rows) × columns [0, cols) (rows ≤ MR, cols ≤ nr) of the tile at
  /// c (+)= A [MR, kk] · B panel [kk, nr]; `resume` starts each chain from C. A is a packed panel
  /// (element (r, k) at ap[k·mr + r], `Direct` false) or rows of op(A) read in place (ap[r·lda + k],
  /// `Direct` true: MR rows that all exist).
  template <std::size_t MR, bool Direct>
  CAUSALQWEN_TARGET_F32_GEMM static void tile_avx512(const float* ap, std::size_t lda, const float* bp, std::size_t kk, float* c,
                                             std::size_t ldc, std::size_t rows, std::size_t cols, bool resume) {
    const __mmask16 m0 = lanes(cols), m1 = cols > 16 ? lanes(cols - 16) : __mmask16(0);
    __m512 acc[MR][2];
  #pragma GCC unroll 12
    for (std::size_t r = 0; r < MR; ++r) {
      const bool live = resume && r < rows;
      acc[r][0] = live ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
      acc[r][1] = live ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
    }
    for (std::size_t k = 0; k < kk; ++k, bp += nr) {
      const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
  #pragma GCC unroll 12
      for (std::size_t r = 0; r < MR; ++r) {
        const __m512 x = _mm512_set1_ps(Direct ? ap[r * lda + k] : ap[k * mr + r]);
        acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
      }
    }
  #pragma GCC unroll 12
    for (std::size_t r = 0; r < MR; ++r) {
      if (r >= rows) break;
      _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
      _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
    }
  }

  /// tile_avx512 on a packed panel of A, for a run-time row count: the full tile, or a narrower
  /// one for the last rows.
  CAUSALQWEN_TARGET_F32_GEMM static void tile(const float* ap, const float* bp, std::size_t kk, float* c, std::size_t ldc,
                                             std::size_t rows, std::size_t cols, bool resume) {
    if (rows > 8) return tile_avx512<12, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    if (rows > 4) return tile_avx512<8, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    if (rows > 2) return tile_avx512<4, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    if (rows > 1) return tile_avx512<2, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    tile_avx512<1, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
  }

  /// The tile of mr rows of op(A) read in place (rows·lda apart from ap).
  CAUSALQWEN_TARGET_F32_GEMM static void tile_direct(const float* ap, std::size_t lda, const float* bp, std::size_t kk, float* c,
                                                     std::size_t ldc, std::size_t cols, bool resume) {
    tile_avx512<mr, true>(ap, lda, bp, kk, c, ldc, mr, cols, resume);
  }
};

#define CAUSALQWEN_TARGET_F32_AVX2 __attribute__((target("avx2,fma")))

/// The AVX2 kernel, for CPUs without AVX-512: tiles of 6 rows × 16 columns (two vectors of 8;
/// 12 accumulators, two of B and a broadcast in the 16 registers), blocks of 120 rows of A
/// (120 × 512 floats = 240 KB, in a 512 KB L2; larger blocks gave nothing more). Its chains are
/// the AVX-512 kernel's.
struct Avx2 {
  static constexpr std::size_t mr = 6, nr = 16, mc = 120, kc_max = 512;

  /// Lanes [0, n) of 8 set (n ≤ 8), as vmaskmovps reads them (sign bits).
  CAUSALQWEN_TARGET_F32_AVX2 static __m256i lanes(std::size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<std::size_t>(n, 8))), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  /// Lanes [0, n) of v stored at p (n ≤ 8). vmaskmovps to memory is slow on AMD's cores (a dozen
  /// cycles), so whole vectors and A's 6-lane panel rows are stored without it.
  CAUSALQWEN_TARGET_F32_AVX2 static void store_lanes(float* p, __m256 v, std::size_t n) {
    if (n >= 8) return _mm256_storeu_ps(p, v);
    if (n == 6) {
      _mm_storeu_ps(p, _mm256_castps256_ps128(v));
      return _mm_storel_pi(reinterpret_cast<__m64*>(p + 4), _mm256_extractf128_ps(v, 1));
    }
    _mm256_maskstore_ps(p, lanes(n), v);
  }
  /// Lanes [0, n) of p, zero in the others (n ≤ 8).
  CAUSALQWEN_TARGET_F32_AVX2 static __m256 load_lanes(const float* p, std::size_t n) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(n));
  }

  /// The block r (row i = r[i]) transposed in place: r[j] lane i ← old r[i] lane j.
  CAUSALQWEN_TARGET_F32_AVX2 static void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {  // pairs of rows interleaved
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {  // then pairs of pairs
      u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {  // then the 128-bit halves
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }

  /// Up to 8 rows turned into columns, 8 × 8 values at a time in registers:
  ///   dst[(k − k0)·stride + i] ← src[i·ld + k]  for k ∈ [k0, k1) and the lanes i < width,
  /// reading rows i < count (≤ 8) and 0 for the others.
  CAUSALQWEN_TARGET_F32_AVX2 static void rows_to_columns(const float* src, std::size_t ld, std::size_t count, std::size_t k0,
                                                        std::size_t k1, float* dst, std::size_t stride, std::size_t width) {
    __m256 block[8];
    for (std::size_t kb = k0; kb < k1; kb += 8) {
      const std::size_t n = std::min<std::size_t>(8, k1 - kb);
      for (std::size_t i = 0; i < 8; ++i) block[i] = i < count ? load_lanes(src + i * ld + kb, n) : _mm256_setzero_ps();
      transpose8(block);
      for (std::size_t t = 0; t < n; ++t) store_lanes(dst + (kb - k0 + t) * stride, block[t], width);
    }
  }

  /// A's panel [k1 − k0, mr] ← op(A)'s rows [m0, m0 + mr) (zero past M), columns [k0, k1).
  CAUSALQWEN_TARGET_F32_AVX2 static void pack_a_panel(const Operand& a, std::size_t M, std::size_t m0, std::size_t k0, std::size_t k1,
                                                     float* dst) {
    const std::size_t rows = std::min(mr, M - m0);
    if (a.transposed) {  // op(A)'s row m is A's column m: each k gives mr contiguous values
      for (std::size_t k = k0; k < k1; ++k, dst += mr) store_lanes(dst, load_lanes(a.p + k * a.ld + m0, rows), mr);
      return;
    }
    rows_to_columns(a.p + m0 * a.ld, a.ld, rows, k0, k1, dst, mr, mr);
  }

  /// The panels of op(A)'s rows [m_first, m_last), each [k1 − k0, mr] (zero past M), one after
  /// another from dst; transposed A is read eight rows of A at a time across the whole block, as
  /// the AVX-512 kernel reads it.
  CAUSALQWEN_TARGET_F32_AVX2 static void pack_a_block(const Operand& a, std::size_t M, std::size_t m_first, std::size_t m_last,
                                                     std::size_t k0, std::size_t k1, float* dst) {
    if (!a.transposed) {
      for (std::size_t m = m_first; m < m_last; m += mr) pack_a_panel(a, M, m, k0, k1, dst + (m - m_first) * (k1 - k0));
      return;
    }
    constexpr std::size_t group = 8;
    const std::size_t kk = k1 - k0;
    for (std::size_t kg = k0; kg < k1; kg += group) {
      const std::size_t kg_end = std::min(k1, kg + group);
      float* out = dst + (kg - k0) * mr;
      for (std::size_t m = m_first; m < m_last; m += mr, out += kk * mr) {
        const std::size_t rows = std::min(mr, M - m);
        for (std::size_t k = kg; k < kg_end; ++k) store_lanes(out + (k - kg) * mr, load_lanes(a.p + k * a.ld + m, rows), mr);
      }
    }
  }

  /// B's panel [k1 − k0, nr] ← op(B)'s columns [n0, n0 + nr) (zero past N), rows [k0, k1).
  CAUSALQWEN_TARGET_F32_AVX2 static void pack_b_panel(const Operand& b, std::size_t N, std::size_t n0, std::size_t k0, std::size_t k1,
                                                     float* dst) {
    const std::size_t cols = std::min(nr, N - n0);
    if (!b.transposed) {  // op(B)'s row k is B's row k: nr contiguous values each
      const std::size_t low = std::min<std::size_t>(cols, 8), high = cols > 8 ? cols - 8 : 0;
      for (std::size_t k = k0; k < k1; ++k, dst += nr) {
        const float* src = b.p + k * b.ld + n0;
        _mm256_store_ps(dst, load_lanes(src, low));
        _mm256_store_ps(dst + 8, high ? load_lanes(src + 8, high) : _mm256_setzero_ps());
      }
      return;
    }
    for (std::size_t half = 0; half < nr / 8; ++half)  // op(B)'s column n is B's row n
      rows_to_columns(b.p + (n0 + 8 * half) * b.ld, b.ld, cols > 8 * half ? std::min<std::size_t>(8, cols - 8 * half) : 0, k0, k1,
                      dst + 8 * half, nr, 8);
  }

  /// The micro-kernel: C's rows [0, rows) × columns [0, cols) (rows ≤ MR, cols ≤ nr) of the tile
  /// at c (+)= A [MR, kk] · B panel [kk, nr]; `resume` starts each chain from C. A is a packed
  /// panel (element (r, k) at ap[k·mr + r], `Direct` false) or rows of op(A) read in place
  /// (ap[r·lda + k], `Direct` true: MR rows that all exist).
  template <std::size_t MR, bool Direct>
  CAUSALQWEN_TARGET_F32_AVX2 static void tile_avx2(const float* ap, std::size_t lda, const float* bp, std::size_t kk, float* c,
                                                  std::size_t ldc, std::size_t rows, std::size_t cols, bool resume) {
    const std::size_t n0 = std::min<std::size_t>(cols, 8), n1 = cols > 8 ? cols - 8 : 0;
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; ++r) {
      const bool live = resume && r < rows;
      acc[r][0] = live ? load_lanes(c + r * ldc, n0) : _mm256_setzero_ps();
      acc[r][1] = live && n1 ? load_lanes(c + r * ldc + 8, n1) : _mm256_setzero_ps();
    }
    // four steps of k per turn of the loop: rolled, the loop re-reads its bound from the stack (all
    // 16 registers hold accumulators, B and the broadcast), which costs a short K dearly (the
    // demo's class product, K = 64); the chains are unchanged
#pragma GCC unroll 4
    for (std::size_t k = 0; k < kk; ++k, bp += nr) {
      const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
      for (std::size_t r = 0; r < MR; ++r) {
        const __m256 x = _mm256_broadcast_ss(Direct ? ap + r * lda + k : ap + k * mr + r);
        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 6
    for (std::size_t r = 0; r < MR; ++r) {
      if (r >= rows) break;
      store_lanes(c + r * ldc, acc[r][0], n0);
      if (n1) store_lanes(c + r * ldc + 8, acc[r][1], n1);
    }
  }

  /// tile_avx2 on a packed panel of A, for a run-time row count.
  CAUSALQWEN_TARGET_F32_AVX2 static void tile(const float* ap, const float* bp, std::size_t kk, float* c, std::size_t ldc,
                                             std::size_t rows, std::size_t cols, bool resume) {
    if (rows > 4) return tile_avx2<6, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    if (rows > 2) return tile_avx2<4, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    if (rows > 1) return tile_avx2<2, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
    tile_avx2<1, false>(ap, 0, bp, kk, c, ldc, rows, cols, resume);
  }

  /// The tile of mr rows of op(A) read in place (rows·lda apart from ap).
  CAUSALQWEN_TARGET_F32_AVX2 static void tile_direct(const float* ap, std::size_t lda, const float* bp, std::size_t kk, float* c,
                                                    std::size_t ldc, std::size_t cols, bool resume) {
    tile_avx2<mr, true>(ap, lda, bp, kk, c, ldc, mr, cols, resume);
  }
};

/// Products whose op(B) has fewer columns than this read op(A) in place (when it is stored as
/// is) instead of packing it: packing a value costs about what 16 of its multiply-adds do, so
/// below a few panels of B it would cost a sizeable share of the product.
inline constexpr std::size_t direct_a_max_n = 512;
/// Blocks of K at most this deep walk C along its rows (each tile of C is then next to the last
/// one in memory): with a short sum, C's own traffic weighs more than re-reading B's panels.
inline constexpr std::size_t rows_outer_max_k = 192;

/// How the rows and columns of one (nc, kc) block are dealt into tasks: `m_blocks` blocks of
/// rows (each a multiple of mr, at most mc) × `n_splits` slices of the block's panels.
struct Split {
  std::size_t m_blocks, rows_per_block, n_splits;
};
/// M blocks of at most mc rows, rounded to multiples of mr, `blocks` of them at least.
inline Split row_split(std::size_t M, std::size_t blocks, std::size_t n_splits, std::size_t mr) {
  const std::size_t rows = ((M + blocks - 1) / blocks + mr - 1) / mr * mr;
  return {(M + rows - 1) / rows, rows, n_splits};
}
/// The split of an [M, N] product: by rows (each thread its own rows, A packed once, every panel
/// of B read by every thread, half of them packed on the other core), or by panels of B (every
/// thread all the rows, A packed by each, and only the panels it packed itself). When op(B) has
/// at least as many columns as op(A) has rows, A is the smaller to pack twice and the panels are
/// taken unless rows deal out more evenly by 5 % (splitting the panels shares the packing of B);
/// else rows are, unless panels deal out more evenly by 5 % (whole tiles of 12
/// rows: 128 rows are 6 + 5 tiles, one thread idle a sixth of the time). `mr`, `mc`: the kernel's
/// tile rows and block rows.
inline Split split_for(std::size_t M, std::size_t N, std::size_t panels, std::size_t threads, std::size_t mr, std::size_t mc) {
  const std::size_t least_blocks = (M + mc - 1) / mc;
  if (threads <= 1) return row_split(M, least_blocks, 1, mr);
  const Split by_rows = row_split(M, (least_blocks + threads - 1) / threads * threads, 1, mr);
  const double rows_share = double(M) / double(threads) /
                            double(((by_rows.m_blocks + threads - 1) / threads) * by_rows.rows_per_block);
  const std::size_t n_splits = std::min(panels, threads);
  const double panels_share = double(panels) / double(threads) / double((panels + n_splits - 1) / n_splits);
  if (N >= M ? panels_share + 0.05 >= rows_share : panels_share >= rows_share + 0.05)
    return row_split(M, least_blocks, n_splits, mr);
  return by_rows;
}

/// C (+)= op(A)·op(B) on a kernel (Avx512 or Avx2): its tiles, packers and tile sizes.
template <class Kernel>
void multiply_blocked(const Operand& a, const Operand& b, std::size_t M, std::size_t N, std::size_t K, float* c,
                      std::size_t ldc, bool accumulate) {
  constexpr std::size_t mr = Kernel::mr, nr = Kernel::nr, mc = Kernel::mc, kc_max = Kernel::kc_max;
  const std::size_t threads =
      (double(M) * double(N) * double(K) < parallel_multiply_adds || omp_in_parallel()) ? 1 : std::size_t(omp_get_max_threads());
  thread_local PageBuffer<float> b_pack;  // panels [kc][nr]: shared by the team, or a region per thread
  const std::size_t kc = k_block(K, kc_max);
  const std::size_t first_panels = (std::min(nc, N) + nr - 1) / nr;
  // room for every thread's panels from the same place in every block, ⌈first_panels / team⌉ a thread
  const std::size_t b_floats = (first_panels + threads - 1) * kc * nr;
  float* const b_base = b_pack.grow(b_floats);  // the calling thread's buffer (b_pack names another one on the team's threads)
  const bool direct_a = !a.transposed && N < direct_a_max_n;
  // One thread's share: `team` threads, this one `id`, meeting at `sync` after packing B. The
  // shares are dealt by hand (no worksharing construct), so that a product run on one thread
  // inside someone else's parallel region does not bind to that region's team. When every block
  // is split by panels, one slice a thread, a thread's tiles read only the panels it packed and
  // the threads never wait for each other.
  const auto share = [&](std::size_t team, std::size_t id, auto&& sync) {
    const auto split_of = [&](std::size_t j0) { return split_for(M, N, (std::min(nc, N - j0) + nr - 1) / nr, team, mr, mc); };
    const bool on_its_own = team > 1 && split_of(0).n_splits == team && split_of((N - 1) / nc * nc).n_splits == team;
    const std::size_t region = (first_panels + team - 1) / team * kc * nr;  // a thread's floats of the buffer
    thread_local PageBuffer<float> a_pack;  // [mc/mr panels][kc][mr]
    float* const ap_all = a_pack.grow(mc * kc_max);
    for (std::size_t j0 = 0; j0 < N; j0 += nc) {
      const std::size_t nn = std::min(nc, N - j0), panels = (nn + nr - 1) / nr;
      const Split split = split_of(j0);
      const std::size_t tasks = split.m_blocks * split.n_splits;
      for (std::size_t k0 = 0; k0 < K; k0 += kc) {
        const std::size_t kk = std::min(kc, K - k0);
        const bool resume = accumulate || k0 > 0;
        const std::size_t my_first = id * panels / team;
        // panel p at bp_all + p·kk·nr: from the buffer's start, or from this thread's region
        float* const bp_all = on_its_own ? b_base + id * region - my_first * kk * nr : b_base;
        for (std::size_t p = my_first; p < (id + 1) * panels / team; ++p)
          Kernel::pack_b_panel(b, N, j0 + p * nr, k0, k0 + kk, bp_all + p * kk * nr);
        if (!on_its_own) sync();  // every panel of B packed
        // the source of the panels this thread packs for the next block, read into cache while
        // this block's tiles run (the packing then does not wait for memory)
        Prefetcher next;
        {
          const bool same_columns = k0 + kk < K;
          const std::size_t j0n = same_columns ? j0 : j0 + nc, k0n = same_columns ? k0 + kk : 0;
          if (j0n < N) {
            const std::size_t kkn = std::min(kc, K - k0n), panels_n = (std::min(nc, N - j0n) + nr - 1) / nr;
            const std::size_t first = j0n + id * panels_n / team * nr, last = std::min(N, j0n + (id + 1) * panels_n / team * nr);
            const std::size_t calls = std::max<std::size_t>(1, (M + mr - 1) / mr * panels / team);
            if (first < last)
              next = b.transposed ? Prefetcher(b.p + first * b.ld + k0n, b.ld, last - first, kkn, calls)
                                  : Prefetcher(b.p + k0n * b.ld + first, b.ld, kkn, last - first, calls);
          }
        }
        for (std::size_t t = id; t < tasks; t += team) {
          const std::size_t mb = t / split.n_splits, ns = t % split.n_splits;
          const std::size_t m_first = mb * split.rows_per_block, m_last = std::min(M, m_first + split.rows_per_block);
          const std::size_t p_first = ns * panels / split.n_splits, p_last = (ns + 1) * panels / split.n_splits;
          // A's panels: all packed, or (read in place) only a last one of fewer than mr rows
          if (!direct_a)
            Kernel::pack_a_block(a, M, m_first, m_last, k0, k0 + kk, ap_all);
          else if (const std::size_t m = m_first + (m_last - m_first) / mr * mr; m < m_last)
            Kernel::pack_a_panel(a, M, m, k0, k0 + kk, ap_all + (m - m_first) * kk);
          // the tile of panel p and rows [m, m + mr), after requesting the lines of C of the
          // tile (p2, m2) that comes next, so that they arrive while this one runs
          const auto run = [&](std::size_t p, std::size_t m, std::size_t p2, std::size_t m2) {
            next.prefetch_some();
            if (p2 < p_last && m2 < m_last) {
              const std::size_t n2 = j0 + p2 * nr, cols2 = std::min(nr, N - n2);
              for (std::size_t r = m2; r < std::min(m_last, m2 + mr); ++r)
                for (std::size_t v = 0; v < cols2; v += 16) __builtin_prefetch(c + r * ldc + n2 + v, 1, 3);
            }
            const std::size_t n = j0 + p * nr, cols = std::min(nr, N - n), rows = std::min(mr, m_last - m);
            const float* bp = bp_all + p * kk * nr;
            if (direct_a && rows == mr)
              Kernel::tile_direct(a.p + m * a.ld + k0, a.ld, bp, kk, c + m * ldc + n, ldc, cols, resume);
            else
              Kernel::tile(ap_all + (m - m_first) * kk, bp, kk, c + m * ldc + n, ldc, rows, cols, resume);
          };
          if (kk <= rows_outer_max_k) {  // along C's rows: C streams in order, B's panels from L2
            for (std::size_t m = m_first; m < m_last; m += mr)
              for (std::size_t p = p_first; p < p_last; ++p) run(p, m, p + 1 < p_last ? p + 1 : p_first, p + 1 < p_last ? m : m + mr);
          } else {  // down C's columns: a panel of B stays in L1 for all the rows
            for (std::size_t p = p_first; p < p_last; ++p)
              for (std::size_t m = m_first; m < m_last; m += mr) run(p, m, m + mr < m_last ? p : p + 1, m + mr < m_last ? m + mr : m_first);
          }
        }
        if (!on_its_own) sync();  // B's panels are free for the next block
      }
    }
  };
  if (threads == 1) return share(1, 0, [] {});  // no parallel region: even a team of one allocates one
#pragma omp parallel num_threads(int(threads))
  share(std::size_t(omp_get_num_threads()), std::size_t(omp_get_thread_num()), [] {
#pragma omp barrier
  });
}
#endif

}  // namespace detail_f32

/// Which kernel f32_matmul runs: the fastest this CPU has (`automatic`, the default: AVX-512F,
/// else AVX2 with FMA), the AVX2 one even on a CPU with AVX-512 (`avx2`, for tests and
/// comparisons), or the portable loop everywhere (`portable`: the same bits, slowly).
enum class F32Kernel { automatic, avx2, portable };

/// Sets the kernel of every later f32_matmul in this process.
inline void set_f32_kernel(F32Kernel k) { kernel_choice<F32Kernel>() = k; }

/// The instruction set f32_matmul runs on now.
enum class F32Isa { avx512, avx2, portable };

/// What the choice of `set_f32_kernel` gives on this CPU (a kernel the CPU lacks falls back to
/// the next one down).
inline F32Isa f32_kernel_isa() { return kernel_isa<F32Kernel>(detail_f32::cpu_has_avx512f(), F32Isa::avx512); }

/// Whether f32_matmul runs one of its instruction-set kernels now (AVX-512 or AVX2).
inline bool f32_kernel_is_hardware() { return f32_kernel_isa() != F32Isa::portable; }

/// "AVX-512", "AVX2" or "portable": what f32_matmul runs on now.
inline const char* f32_kernel_name() {
  switch (f32_kernel_isa()) {
    case F32Isa::avx512: return "AVX-512";
    case F32Isa::avx2: return "AVX2";
    default: return "portable";
  }
}

/// C [M,N] = op(A)·op(B) (+ C when `accumulate`), row-major with leading dimensions lda, ldb,
/// ldc: each output one chain of fused multiply-adds over k in increasing order (see the file
/// comment), on AVX-512 or AVX2 when the CPU has it and `set_f32_kernel` allows, else on the
/// portable loop; all three give the same bits.
inline void f32_matmul(bool a_transposed, bool b_transposed, std::size_t M, std::size_t N, std::size_t K, const float* a,
                       std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate) {
  if (M == 0 || N == 0) return;
  const detail_f32::Operand A{a, lda, a_transposed}, B{b, ldb, b_transposed};
#ifdef CAUSALQWEN_F32_KERNEL
  if (const F32Isa isa = f32_kernel_isa(); isa != F32Isa::portable) {
    if (K == 0) {
      if (!accumulate)
        for (std::size_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
      return;
    }
    if (isa == F32Isa::avx512) return detail_f32::multiply_blocked<detail_f32::Avx512>(A, B, M, N, K, c, ldc, accumulate);
    return detail_f32::multiply_blocked<detail_f32::Avx2>(A, B, M, N, K, c, ldc, accumulate);
  }
#endif
  detail_f32::multiply_portable(A, B, M, N, K, c, ldc, accumulate);
}

}  // namespace causalqwen::linalg
