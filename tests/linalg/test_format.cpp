// The storage format of a weight's numbers (linalg/format.hpp): its names, the two parsers of the
// program's flags and their refusals, the round trip name → format, and the refusal of int8 by
// the functions that take the arithmetic of training products.
#include "../support/float_matrices.hpp"

#include <causalqwen/linalg/abs_weight.hpp>
#include <causalqwen/linalg/format.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <causalqwen/linalg/weight.hpp>
#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cqtest::c2;
using cqtest::v2;

TEST_CASE("format names are f32, bf16 and int8, and each parses back to its format") {
  CHECK(la::format_name(la::Format::f32) == "f32");
  CHECK(la::format_name(la::Format::bf16) == "bf16");
  CHECK(la::format_name(la::Format::int8) == "int8");
  for (const auto f : {la::Format::f32, la::Format::bf16, la::Format::int8}) {
    CAPTURE(la::format_name(f));
    CHECK(la::parse_weight_type(la::format_name(f)) == f);
    CHECK(la::is_product_format(f) == (f != la::Format::int8));
    if (la::is_product_format(f)) CHECK(la::parse_precision(la::format_name(f)) == f);
  }
}

TEST_CASE("parse_weight_type accepts f32, bf16 and int8 and refuses anything else with the accepted names") {
  for (const std::string bad : {"fp8", "F32", "", "bf16 ", "int4"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(la::parse_weight_type(bad),
                         ("causalqwen::parse_weight_type: unknown weight type '" + bad + "': expected f32, bf16 or int8").c_str(),
                         cq::DomainError);
  }
}

TEST_CASE("parse_precision accepts f32 and bf16 only: int8 is refused like any other name") {
  for (const std::string bad : {"int8", "fp16", "", "BF16"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(la::parse_precision(bad),
                         ("causalqwen::parse_precision: unknown precision '" + bad + "': expected f32 or bf16").c_str(),
                         cq::DomainError);
  }
}

TEST_CASE("the functions that take the arithmetic of training products refuse int8, naming themselves and f32 or bf16") {
  CHECK_NOTHROW(la::require_product_format(la::Format::f32, "f"));
  CHECK_NOTHROW(la::require_product_format(la::Format::bf16, "f"));
  CHECK_THROWS_WITH_AS(la::require_product_format(la::Format::int8, "f"),
                       "causalqwen::f: training products run in f32 or bf16, not int8", cq::DomainError);

  const std::size_t M = 3, K = 5, N = 4;
  const std::vector<float> x(M * K, 0.5f), w(N * K, 0.25f), dy(M * N, 1.0f);
  std::vector<float> y(M * N, 0.0f), dx(M * K, 0.0f), dw(N * K, 0.0f);
  const la::Weight<const float> W(c2(w, N, K));
  CHECK_THROWS_WITH_AS(W.with_precision(la::Format::int8),
                       "causalqwen::Weight::with_precision: training products run in f32 or bf16, not int8", cq::DomainError);
  CHECK(W.with_precision(la::Format::bf16).precision == la::Format::bf16);

  // a handle whose forms name int8 directly (not through with_precision): each product refuses it
  la::Weight<const float> int8_products = W;
  int8_products.precision = la::Format::int8;
  CHECK_THROWS_WITH_AS(la::linear_forward<float>(v2(y, M, N), c2(x, M, K), int8_products),
                       "causalqwen::linear_forward: training products run in f32 or bf16, not int8", cq::DomainError);
  CHECK_THROWS_WITH_AS(la::linear_backward_input<float>(v2(dx, M, K), c2(dy, M, N), int8_products),
                       "causalqwen::linear_backward_input: training products run in f32 or bf16, not int8", cq::DomainError);
  CHECK_THROWS_WITH_AS(la::linear_backward_weight<float>(v2(dw, N, K), c2(dy, M, N), c2(x, M, K), nullptr, la::Format::int8),
                       "causalqwen::linear_backward_weight: training products run in f32 or bf16, not int8", cq::DomainError);
  CHECK_THROWS_WITH_AS(la::abs_linear_backward_weight<float>(v2(dw, N, K), c2(dy, M, N), c2(x, M, K), int8_products),
                       "causalqwen::abs_linear_backward_weight: training products run in f32 or bf16, not int8", cq::DomainError);
  for (const float g : dw) CHECK(g == 0.0f);  // refused before anything was written
  for (const float g : dx) CHECK(g == 0.0f);
}
