/// The micro-kernel of the bf16 rows product on an instruction set: `tile` for bf16 rows of X
/// (AVX512-BF16's or the portable loop) and for rows of X split for AVX2, each including the
/// kernels of its instruction set (kernels/bf16_tiles_*.hpp).
#pragma once
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles_avx2.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles_avx512.hpp"
#include "causalqwen/linalg/kernels/bf16_tiles_portable.hpp"

#include <cstddef>
#include <cstdint>

namespace causalqwen::linalg::detail_bf16 {

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

}  // namespace causalqwen::linalg::detail_bf16
