/// What the bf16 kernels run on: the instruction-set enum Bf16Isa, whether this CPU runs
/// AVX512-BF16 (asked at run time), and the attributes the kernels are compiled with:
/// CAUSALQWEN_TARGET_BF16 (AVX512-BF16 with AVX-512 F/BW/DQ/VL) and CAUSALQWEN_TARGET_AVX2 (AVX2
/// with FMA), both defined where CAUSALQWEN_BF16_KERNEL is (x86-64 with GCC or Clang), and
/// CAUSALQWEN_NO_LOOP_VECTORIZE for the portable loops.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CAUSALQWEN_BF16_KERNEL 1
#endif

#ifdef CAUSALQWEN_BF16_KERNEL
#define CAUSALQWEN_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define CAUSALQWEN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

/// GCC 12's loop vectoriser at -O3 miscompiles the portable kernel (tile_portable,
/// kernels/bf16_tiles_portable.hpp: with three chunks of ones a row sums to 56, not 48), so that
/// the portable kernels are compiled without it.
#if defined(__GNUC__) && !defined(__clang__)
#define CAUSALQWEN_NO_LOOP_VECTORIZE __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define CAUSALQWEN_NO_LOOP_VECTORIZE
#endif

namespace causalqwen::linalg {

/// The instruction set the bf16 products run on: AVX512-BF16's vdpbf16ps, AVX2 with FMA (bf16
/// values widened to float, two FMAs for each of vdpbf16ps's pairs), or the portable loop.
enum class Bf16Isa { avx512_bf16, avx2, portable };

namespace detail_bf16 {

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

}  // namespace detail_bf16

}  // namespace causalqwen::linalg
