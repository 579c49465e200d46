/// The arithmetic of a linear map's products in training (Precision: f32 or bf16), with its
/// name and its parser.
#pragma once
#include "causalqwen/core/error.hpp"

#include <string>
#include <string_view>

namespace causalqwen::linalg {

/// The arithmetic of a linear map's products in training: float throughout (`f32`), or bf16
/// operands with float sums (`bf16`: mixed precision; the weights, gradients and optimiser
/// stay float, and each product rounds its two operands to bf16 when it is made).
enum class Precision { f32, bf16 };

/// "f32" or "bf16": the precision's name, as parse_precision reads it.
inline std::string_view precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

/// "f32" or "bf16" → the precision; anything else is refused with the accepted names.
inline Precision parse_precision(std::string_view s) {
  if (s == "f32") return Precision::f32;
  if (s == "bf16") return Precision::bf16;
  throw DomainError("causalqwen::parse_precision: unknown precision '" + std::string(s) + "': expected f32 or bf16");
}

}  // namespace causalqwen::linalg
