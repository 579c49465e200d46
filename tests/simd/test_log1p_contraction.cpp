// log1p_unit_float's AVX-512 kernel (simd/log1p_float.hpp) keeps std::log1p's bits only while no
// multiply and add of it are fused into one instruction. This file is compiled with
// -ffp-contract=fast, the setting that asks the compiler to fuse wherever it can (GCC's default;
// Clang's when asked), so a kernel that relies on the build's flags to stay unfused fails here
// under either compiler. The inputs below are ones at which the kernel compiled with its
// products fused gives other bits than std::log1p (found by sweeping every float of [0, 1] with
// such a build): at least one of each binade where that happens, from 2^-13 to 1/2.
#include <causalqwen/simd/log1p_float.hpp>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace cq = causalqwen;

namespace {

/// Float bits at which a fused multiply-add in the kernel changes the result.
constexpr std::uint32_t fusion_sensitive_bits[] = {
    0x396ce5c6u, 0x3a475bfdu, 0x3a4a2191u, 0x3a6bd77eu, 0x3ab1d0ecu, 0x3aeec523u, 0x3afe4137u, 0x3b021ce9u,
    0x3b2817c8u, 0x3b6e5855u, 0x3b7f7cf2u, 0x3b80aa44u, 0x3bbc82afu, 0x3bd8d0b2u, 0x3beea38au, 0x3c01a62fu,
    0x3c4605bcu, 0x3c61ca5eu, 0x3c733a13u, 0x3c802ed1u, 0x3cc057bau, 0x3cd99e46u, 0x3cf05ae9u, 0x3d0023c0u,
    0x3d3e9c6cu, 0x3d5b4039u, 0x3d712543u, 0x3d801301u, 0x3dbd6171u, 0x3ddade9au, 0x3df273b6u, 0x3e000e06u,
    0x3e3a57a2u, 0x3e5815dbu, 0x3e7182d0u, 0x3e800002u, 0x3ea135f4u, 0x3ebc90ebu, 0x3ed058dfu, 0x3f00022eu,
    0x3f08e373u, 0x3f123bcdu};

bool cpu_has_avx512f() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

/// How many of `x` the kernel (called directly, not through the agreement check that would fall
/// back to the scalar loop) maps to other bits than std::log1p; the first few are printed.
std::size_t kernel_mismatches([[maybe_unused]] const std::vector<float>& x) {
  std::size_t bad = 0;
#ifdef CAUSALQWEN_LOG1P_KERNEL
  std::vector<float> y(x.size());
  cq::detail_log1p::log1p_unit_avx512(x.data(), y.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = std::log1p(x[i]);
    if (std::bit_cast<std::uint32_t>(y[i]) != std::bit_cast<std::uint32_t>(want) && bad++ < 5)
      std::printf("kernel log1p(%a) = %a, std::log1p gives %a\n", double(x[i]), double(y[i]), double(want));
  }
#endif
  return bad;
}

}  // namespace

TEST_CASE("log1p_unit_float's kernel compiled with -ffp-contract=fast keeps std::log1p's bits") {
  if (!cpu_has_avx512f()) {
    std::printf("no AVX-512 here: the kernel cannot run; only the scalar loop is checked\n");
    CHECK_FALSE(cq::log1p_unit_float_is_vectorised());
    return;
  }
  std::vector<float> sensitive;
  for (const std::uint32_t b : fusion_sensitive_bits) sensitive.push_back(std::bit_cast<float>(b));
  CHECK(kernel_mismatches(sensitive) == 0);
  // every float of [1/4, 1/2), the binade with the most fusion-sensitive inputs
  std::vector<float> binade;
  for (std::uint32_t b = 0x3e800000u; b < 0x3f000000u; ++b) binade.push_back(std::bit_cast<float>(b));
  CHECK(kernel_mismatches(binade) == 0);
  // and so the agreement check on first use keeps the vector path
  CHECK(cq::log1p_unit_float_is_vectorised());
}
