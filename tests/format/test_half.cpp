// bfloat16 and IEEE binary16 conversions: decoding of known bit patterns (zeros, subnormals,
// normals, the extremes, infinities, NaN), every 16-bit pattern surviving a round trip through
// float, and narrowing that rounds to nearest-even (checked against the neighbouring values).
#include <causalqwen/format/half.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace cq = causalqwen;
namespace format = causalqwen::format;

namespace {
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }
}  // namespace

TEST_CASE("bf16_to_float decodes known bit patterns exactly") {
  CHECK(same_bits(cq::bf16_to_float(0x0000), 0.0f));
  CHECK(same_bits(cq::bf16_to_float(0x8000), -0.0f));
  CHECK(cq::bf16_to_float(0x3F80) == 1.0f);
  CHECK(cq::bf16_to_float(0xC020) == -2.5f);
  CHECK(cq::bf16_to_float(0x4049) == 3.140625f);
  CHECK(cq::bf16_to_float(0x0001) == std::ldexp(1.0f, -133));  // smallest subnormal
  CHECK(cq::bf16_to_float(0x007F) == std::ldexp(127.0f, -133));  // largest subnormal
  CHECK(cq::bf16_to_float(0x0080) == std::numeric_limits<float>::min());  // smallest normal
  CHECK(cq::bf16_to_float(0x7F7F) == std::ldexp(255.0f, 120));  // largest finite
  CHECK(cq::bf16_to_float(0x7F80) == std::numeric_limits<float>::infinity());
  CHECK(cq::bf16_to_float(0xFF80) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(cq::bf16_to_float(0x7FC0)));
  CHECK(std::isnan(cq::bf16_to_float(0xFF81)));
}

TEST_CASE("f16_to_float decodes known bit patterns exactly") {
  CHECK(same_bits(format::f16_to_float(0x0000), 0.0f));
  CHECK(same_bits(format::f16_to_float(0x8000), -0.0f));
  CHECK(format::f16_to_float(0x3C00) == 1.0f);
  CHECK(format::f16_to_float(0xC100) == -2.5f);
  CHECK(format::f16_to_float(0x3C01) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(format::f16_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(format::f16_to_float(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(format::f16_to_float(0x0200) == std::ldexp(1.0f, -15));
  CHECK(format::f16_to_float(0x03FF) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(format::f16_to_float(0x0400) == std::ldexp(1.0f, -14));  // smallest normal
  CHECK(format::f16_to_float(0x7BFF) == 65504.0f);  // largest finite
  CHECK(format::f16_to_float(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(format::f16_to_float(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(format::f16_to_float(0x7E00)));
  CHECK(std::isnan(format::f16_to_float(0x7C01)));  // signalling NaN stays NaN
  CHECK(std::signbit(format::f16_to_float(0xFE00)));
}

TEST_CASE("f16_to_float agrees with the value formula on every one of the 65536 patterns") {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const int sign = (h >> 15) ? -1 : 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    const float got = format::f16_to_float(h);
    if (exponent == 0x1F) {
      if (mantissa == 0) CHECK(got == sign * std::numeric_limits<float>::infinity());
      else CHECK(std::isnan(got));
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(double(mantissa), -24)
                                          : sign * std::ldexp(1024.0 + mantissa, exponent - 25);
    if (static_cast<double>(got) != expected || std::signbit(got) != (sign < 0)) {
      FAIL_CHECK(fmt::format("pattern {:#06x} decoded to {}", bits, got));
      break;
    }
  }
}

TEST_CASE("every bf16 and f16 pattern survives a round trip through float") {
  int bf16_failures = 0, f16_failures = 0;
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float b = cq::bf16_to_float(h), f = format::f16_to_float(h);
    if (std::isnan(b)) bf16_failures += !std::isnan(cq::bf16_to_float(cq::float_to_bf16(b)));
    else bf16_failures += cq::float_to_bf16(b) != h;
    if (std::isnan(f)) f16_failures += !std::isnan(format::f16_to_float(format::float_to_f16(f)));
    else f16_failures += format::float_to_f16(f) != h;
  }
  CHECK(bf16_failures == 0);
  CHECK(f16_failures == 0);
}

TEST_CASE("float_to_f16 rounds to nearest, ties to even, with gradual underflow") {
  const float ulp1 = std::ldexp(1.0f, -10);
  CHECK(format::float_to_f16(1.0f + ulp1 / 2) == 0x3C00);      // tie → even (1.0)
  CHECK(format::float_to_f16(1.0f + 1.5f * ulp1) == 0x3C02);   // tie → even (1 + 2 ulp)
  CHECK(format::float_to_f16(1.0f + 0.51f * ulp1) == 0x3C01);  // above half → up
  CHECK(format::float_to_f16(65504.0f) == 0x7BFF);
  CHECK(format::float_to_f16(65519.996f) == 0x7BFF);           // below the 65520 midpoint
  CHECK(format::float_to_f16(65520.0f) == 0x7C00);             // midpoint, odd side → infinity
  CHECK(format::float_to_f16(-1e10f) == 0xFC00);
  CHECK(format::float_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(format::float_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie between 0 and 2⁻²⁴ → 0
  CHECK(format::float_to_f16(std::ldexp(1.0f, -25) * 1.0001f) == 0x0001);
  CHECK(format::float_to_f16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 subnormal ulps → even (2)
  CHECK(format::float_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);  // rounds up into the normals
  CHECK(format::float_to_f16(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  CHECK((format::float_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7E00) == 0x7E00);
}

TEST_CASE("float_to_bf16 rounds to nearest, ties to even") {
  CHECK(cq::float_to_bf16(1.0f) == 0x3F80);
  CHECK(cq::float_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie → even
  CHECK(cq::float_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie → even (up)
  CHECK(cq::float_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);
  CHECK(cq::float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // overflows to inf
  CHECK(cq::float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(std::isnan(cq::bf16_to_float(cq::float_to_bf16(std::bit_cast<float>(0x7F800001u)))));
}

TEST_CASE("narrowing picks the nearest representable value (random floats)") {
  std::mt19937 rng(static_cast<std::uint32_t>(cqtest::test_seed(4242, "narrowing nearest")));
  std::uniform_int_distribution<std::uint32_t> any_bits;
  int failures = 0;
  for (int i = 0; i < 200000 && failures < 5; ++i) {
    const float x = std::bit_cast<float>(any_bits(rng));
    if (std::isnan(x)) continue;
    // Scale into the binary16 range about half the time, so both formats see normal,
    // subnormal and overflowing inputs.
    int exponent = 0;
    const float fraction = std::frexp(x, &exponent);
    const float y = (i % 2) ? std::ldexp(fraction, static_cast<int>(i % 44) - 28) : x;
    struct Format {
      std::uint16_t (*narrow)(float);
      float (*widen)(std::uint16_t);
    };
    for (Format f : {Format{cq::float_to_bf16, cq::bf16_to_float}, Format{format::float_to_f16, format::f16_to_float}}) {
      const std::uint16_t h = f.narrow(y);
      const double got = f.widen(h);
      if (std::isinf(got)) continue;  // overflow is checked by the cases above
      const auto magnitude = static_cast<std::uint16_t>(h & 0x7FFF);
      // The neighbours in magnitude (for ±0 the mirror image stands in for the one below).
      const double below = magnitude > 0 ? f.widen(static_cast<std::uint16_t>(h - 1)) : -got;
      const double above = f.widen(static_cast<std::uint16_t>(h + 1));
      const double error = std::fabs(got - double(y)), d_below = std::fabs(below - double(y));
      const double d_above = std::isinf(above) ? INFINITY : std::fabs(above - double(y));
      const bool nearest = error <= d_below && error <= d_above;
      const bool tie = error == d_below || error == d_above;
      const bool tie_is_even = !tie || (h & 1) == 0;
      if (!nearest || !tie_is_even) {
        ++failures;
        FAIL_CHECK(fmt::format("x = {} narrowed to {:#06x}", y, h));
      }
    }
  }
  CHECK(failures == 0);
}
