/// The operands of the bf16 rows product, rounded to bf16 once: a float matrix packed into bf16
/// rows or panels (pack: AVX-512, AVX2 or the portable loop, the same bits), X's rows split into
/// odd and even values as floats for the AVX2 kernel (pack_split_rows), and the W side of a
/// product (PanelSource) with the bf16 panels a task reads of it (task_group: a packed copy, |W|,
/// int8 panels widened, or float rows packed in the task).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_vectors.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/transpose16.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace causalqwen::linalg::detail_bf16 {

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
}  // namespace causalqwen::linalg::detail_bf16
