// The multiply-add peaks of this CPU, measured: float FMA (vfmadd231ps zmm) and bf16 dot
// products (vdpbf16ps zmm), on all OpenMP threads, in FLOP/s (2 per multiply-add). A benchmark
// reports its GFLOP/s as a fraction of them. 0 when the CPU lacks the instruction. And one pass
// of a STREAM-like read of memory, which decoding benchmarks report their GB/s against.
#pragma once
#include <causalqwen/linalg/bf16_gemm.hpp>

#include <omp.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace cqbench {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds for one read of a[0, n) (a large array, so from memory): a sum split over the OpenMP
/// threads, each adding into four independent SIMD accumulators (a single scalar chain of float
/// adds would be bound by the add latency, not by memory, and under-measure the bandwidth).
inline double read_pass_seconds(const float* a, std::size_t n) {
  using B = xsimd::batch<float>;
  constexpr std::size_t W = B::size, step = 4 * W;
  const double t = seconds_now();
  double total = 0;
#pragma omp parallel reduction(+ : total)
  {
    const auto nt = static_cast<std::size_t>(omp_get_num_threads()), id = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t blocks = n / step, b0 = blocks * id / nt, b1 = blocks * (id + 1) / nt;
    B s0(0.f), s1(0.f), s2(0.f), s3(0.f);
    for (std::size_t blk = b0; blk < b1; ++blk) {
      const float* p = a + blk * step;
      s0 += B::load_unaligned(p);
      s1 += B::load_unaligned(p + W);
      s2 += B::load_unaligned(p + 2 * W);
      s3 += B::load_unaligned(p + 3 * W);
    }
#if XSIMD_VERSION_MAJOR >= 9
    total += static_cast<double>(xsimd::reduce_add((s0 + s1) + (s2 + s3)));
#else
    total += static_cast<double>(xsimd::hadd((s0 + s1) + (s2 + s3)));
#endif
  }
  const double dt = seconds_now() - t;
  if (total < 0) std::puts("");  // keeps the sum
  return dt;
}

constexpr std::size_t chains = 24;

/// Multiply-add peak in FLOP/s (2 per multiply-add): every thread runs `chains` independent
/// chains of `step` (one vector instruction each) in registers for `iterations` rounds. The
/// chains start from different values and all feed the result, or the compiler merges or drops
/// them (an earlier version of this probe reported 1.5× the real peak that way).
template <class Step>
double peak_flops(std::size_t flops_per_instruction, Step step, std::size_t chain_count = chains) {
  constexpr std::size_t iterations = 10'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t = seconds_now();
    int team = 1;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
      step(iterations);
    }
    best = std::max(best, double(team) * double(iterations) * double(chain_count) * double(flops_per_instruction) / (seconds_now() - t));
  }
  return best;
}

#if defined(__x86_64__) && defined(__GNUC__)
/// `chains` chains of float FMAs (vfmadd231ps zmm: 16 lanes) or, when Bf16, of vdpbf16ps (32
/// bf16 multiply-adds each). (Compiled for both instruction sets; called only when the CPU has
/// the instruction it runs.)
template <bool Bf16>
inline __attribute__((target("avx512f,avx512bf16"))) void multiply_add_chains(std::size_t iterations) {
  __m512 acc[chains];
  for (std::size_t c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(float(c));
  const __m512 x = _mm512_set1_ps(1e-8f), y = _mm512_set1_ps(1.0f);
  const __m512bh xb = (__m512bh)_mm512_set1_epi16(0x3C00), yb = (__m512bh)_mm512_set1_epi16(0x3F80);
  for (std::size_t i = 0; i < iterations; ++i)
#pragma GCC unroll 24
    for (auto& a : acc) {
      if constexpr (Bf16)
        a = _mm512_dpbf16_ps(a, xb, yb);
      else
        a = _mm512_fmadd_ps(x, y, a);
    }
  __m512 sum = acc[0];
  for (std::size_t c = 1; c < chains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  if (out[0] < 0) std::puts("");
}

/// Chains of the AVX2 probe: 12, which with x and y fit the 16 ymm registers (24 spill to the
/// stack and measured half the peak) and cover the FMA latency (2 per cycle × 4 cycles).
constexpr std::size_t avx2_chains = 12;

/// `avx2_chains` chains of float FMAs on 8 lanes (vfmadd231ps ymm), for a CPU with AVX2 and FMA only.
inline __attribute__((target("avx2,fma"))) void fma_chains_avx2(std::size_t iterations) {
  __m256 acc[avx2_chains];
  for (std::size_t c = 0; c < avx2_chains; ++c) acc[c] = _mm256_set1_ps(float(c));
  const __m256 x = _mm256_set1_ps(1e-8f), y = _mm256_set1_ps(1.0f);
  for (std::size_t i = 0; i < iterations; ++i)
#pragma GCC unroll 12
    for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
  __m256 sum = acc[0];
  for (std::size_t c = 1; c < avx2_chains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  if (out[0] < 0) std::puts("");
}
#endif

/// Float FMA peak in FLOP/s: on 16 lanes (AVX-512), else on 8 (AVX2 with FMA), else 0.
inline double float_fma_peak() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return peak_flops(32, multiply_add_chains<false>);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return peak_flops(16, fma_chains_avx2, avx2_chains);
#endif
  return 0;
}

/// bf16 dot-product peak in FLOP/s (0 without AVX512-BF16).
inline double bf16_dot_peak() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (causalqwen::linalg::detail_bf16::cpu_has_avx512_bf16()) return peak_flops(64, multiply_add_chains<true>);
#endif
  return 0;
}

}  // namespace cqbench
