// e^x and log(1 + x) of float arrays (simd/exp_float.hpp, simd/log1p_float.hpp): on a CPU with
// AVX-512 the vector paths run (exp_float's also on AVX2 with FMA, and its AVX2 path is swept
// wherever the CPU has AVX2, AVX-512 CPUs included). exp_float gives std::exp's bits for every float of a dense sweep
// (all floats in [−128, 128] whose low 4 mantissa bits are 0, every 97th float overall, and the
// branch thresholds with their neighbours); log1p_unit_float gives std::log1p's bits for every
// float of [0, 1] (1,065,353,217 of them, about 2 s on 2 threads here) and for blocks holding
// values outside [0, 1]; both for tails of any length and aliased input and output. Their users
// keep their results: attention's softmax; the expression templates' chunked passes (SwiGLU's
// middle, the abduction's softplus and its backward) are checked in
// tests/autodiff/test_expression_chunks.cpp. The sweep over
// all 2^32 floats for exp_float (13 s on 2 threads here) is skipped by default:
// `build/bin/test_exp_float --no-skip`.
#include <causalqwen/simd/exp_float.hpp>
#include <causalqwen/simd/log1p_float.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace cq = causalqwen;

namespace {

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

/// Number of floats with bits first + k·step (k < count) whose array_fn value differs from
/// scalar_fn's; the first one is printed under `name`.
template <class ArrayFn, class ScalarFn>
std::uint64_t mismatches(const char* name, ArrayFn array_fn, ScalarFn scalar_fn, std::uint64_t first, std::uint64_t step,
                         std::uint64_t count) {
  constexpr std::size_t chunk = 4096;
  std::uint64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
  for (std::int64_t c = 0; c < std::int64_t((count + chunk - 1) / chunk); ++c) {
    float x[chunk], y[chunk];
    const std::size_t n = std::size_t(std::min<std::uint64_t>(chunk, count - std::uint64_t(c) * chunk));
    for (std::size_t i = 0; i < n; ++i)
      x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(first + (std::uint64_t(c) * chunk + i) * step));
    array_fn(x, y, n);
    for (std::size_t i = 0; i < n; ++i)
      if (!same_bits(y[i], scalar_fn(x[i]))) {
#pragma omp critical
        if (bad == 0) std::printf("%s(%a) = %a, the scalar function gives %a\n", name, double(x[i]), double(y[i]), double(scalar_fn(x[i])));
        ++bad;
      }
  }
  return bad;
}
/// exp_float against std::exp.
std::uint64_t mismatches(std::uint64_t first, std::uint64_t step, std::uint64_t count) {
  return mismatches("exp_float", cq::exp_float, [](float v) { return std::exp(v); }, first, step, count);
}

bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

TEST_CASE("exp_float runs on vectors where the CPU has AVX-512, or AVX2 with FMA") {
  std::printf("exp_float path: %s\n", cq::exp_float_path());
  CHECK(cq::exp_float_is_vectorised() == (cpu_has_avx512() || cpu_has_avx2_fma()));
  CHECK(std::string(cq::exp_float_path()) == (cpu_has_avx512() ? "AVX-512" : cpu_has_avx2_fma() ? "AVX2" : "scalar"));
}

#if defined(__x86_64__) && defined(__GNUC__)
TEST_CASE("exp_float's AVX2 path equals std::exp bit for bit (swept on any CPU with AVX2, AVX-512 ones included)") {
  if (!cpu_has_avx2_fma()) {
    MESSAGE("this CPU has no AVX2 with FMA: nothing to sweep");
    return;
  }
  const auto avx2 = [](const float* x, float* y, std::size_t n) { cq::detail_exp::exp_avx2(x, y, n); };
  const auto scalar = [](float v) { return std::exp(v); };
  const std::uint32_t pos_end = std::bit_cast<std::uint32_t>(128.0f);
  CHECK(mismatches("exp_avx2", avx2, scalar, 0, 256, pos_end / 256 + 1) == 0);
  CHECK(mismatches("exp_avx2", avx2, scalar, 0x80000000u, 256, pos_end / 256 + 1) == 0);
  CHECK(mismatches("exp_avx2", avx2, scalar, 0, 1021, (std::uint64_t(1) << 32) / 1021) == 0);  // NaNs, infinities, subnormals
  CHECK(cq::detail_exp::vector_path_agrees(cq::detail_exp::ExpPath::avx2));
}
#endif

TEST_CASE("exp_float equals std::exp bit for bit over a dense sweep of floats") {
  const std::uint32_t pos_end = std::bit_cast<std::uint32_t>(128.0f);
  // [0, 128] and [−128, −0] with the low 4 bits of the mantissa 0: 2 × 68 M floats
  CHECK(mismatches(0, 16, pos_end / 16 + 1) == 0);
  CHECK(mismatches(0x80000000u, 16, pos_end / 16 + 1) == 0);
  // every 97th float of all 2^32 (NaNs, infinities, subnormals included)
  CHECK(mismatches(0, 97, (std::uint64_t(1) << 32) / 97) == 0);
}

TEST_CASE("exp_float at the branch thresholds, the specials and their neighbours") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (const float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 0x1.62e42ep6f, -0x1.9fe368p6f,
                        -0x1.9d1d9ep6f, 88.0f, -88.0f, -87.33654f, std::numeric_limits<float>::max(),
                        -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    float below = s, above = s;
    x.push_back(s);
    for (int k = 0; k < 64; ++k) {
      below = std::nextafter(below, -inf);
      above = std::nextafter(above, inf);
      x.push_back(below);
      x.push_back(above);
    }
  }
  std::vector<float> y(x.size());
  cq::exp_float(x.data(), y.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    CHECK(same_bits(y[i], std::exp(x[i])));
  }
  constexpr std::size_t per_special = 129;  // the value and 64 neighbours on each side
  CHECK(std::isinf(y[2 * per_special]));    // e^{+∞}
  CHECK(y[3 * per_special] == 0.0f);        // e^{−∞} = 0: the softmax's masked keys
}

/// array_fn(x, y, n) for every n ≤ x.size(), into a separate y and in place: each value equal to
/// scalar_fn(x[i]) bit for bit, nothing written past n.
template <class ArrayFn, class ScalarFn>
void check_every_tail(ArrayFn array_fn, ScalarFn scalar_fn, const std::vector<float>& x) {
  for (std::size_t n = 0; n <= x.size(); ++n) {
    std::vector<float> y(n + 1, 7.0f), in_place(x.begin(), x.begin() + std::ptrdiff_t(n));
    array_fn(x.data(), y.data(), n);
    array_fn(in_place.data(), in_place.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(same_bits(y[i], scalar_fn(x[i])));
      CHECK(same_bits(in_place[i], scalar_fn(x[i])));
    }
    CHECK(y[n] == 7.0f);
  }
}

TEST_CASE("exp_float: every tail length, and the output may be the input") {
  std::vector<float> x(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -0.37f * float(i) + 1.5f;
  check_every_tail(cq::exp_float, [](float v) { return std::exp(v); }, x);
}

TEST_CASE("log1p_unit_float equals std::log1p on every float of [0, 1]") {
  std::printf("log1p_unit_float runs %s\n", cq::log1p_unit_float_is_vectorised() ? "16 at a time" : "the scalar loop");
  // on AVX-512 with this C library (glibc's fdlibm log1pf) the vector path must be the one running
  CHECK(cq::log1p_unit_float_is_vectorised() == cpu_has_avx512());
  CHECK(mismatches("log1p_unit_float", cq::log1p_unit_float, [](float v) { return std::log1p(v); }, 0, 1,
                   0x3f800001ull) == 0);  // +0 … 1.0f
}

TEST_CASE("log1p_unit_float: values outside [0, 1], every tail length, the output may be the input") {
  std::vector<float> x;
  for (int i = 0; i < 37; ++i) x.push_back(0.027f * float(i));
  x[5] = -0.25f;  // a block with one value outside [0, 1] runs the scalar function
  x[21] = 3.5f;
  x.insert(x.end(), {-0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -1.0f, 1e30f});
  check_every_tail(cq::log1p_unit_float, [](float v) { return std::log1p(v); }, x);
}

TEST_CASE("exp_float equals std::exp for all 2^32 floats" * doctest::skip()) {
  CHECK(mismatches(0, 1, std::uint64_t(1) << 32) == 0);
}
