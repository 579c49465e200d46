/// The storage format of a weight's numbers (Format: f32, bf16 or int8), with its name, the two
/// parsers of the program's flags and the check of the functions that take the arithmetic of
/// training products.
///   f32   4 bytes per number: float itself
///   bf16  2 bytes: bf16(w), round to nearest even
///   int8  1 byte (+ 4 per row of a matrix):  w = q·s, q ∈ [−127, 127], one scale s per row
/// Two choices are named by a Format:
///   how decoding's matrices are stored (a Weight's `decode` copy, CausalQwen::use_weights):
///     f32, bf16 or int8 (packed_weight.hpp);
///   the arithmetic of training products (a Weight's `precision`, CausalQwen::set_precision):
///     f32 (float throughout) or bf16 (mixed precision: bf16 operands, float sums; the weights,
///     gradients and optimiser stay float); int8 is refused there (require_product_format).
#pragma once
#include "causalqwen/core/error.hpp"

#include <string>
#include <string_view>

namespace causalqwen::linalg {

/// The storage format of a weight's numbers (file comment).
enum class Format { f32, bf16, int8 };

/// "f32", "bf16" or "int8": the format's name, as parse_weight_type and parse_precision read it.
inline std::string_view format_name(Format f) {
  switch (f) {
    case Format::bf16: return "bf16";
    case Format::int8: return "int8";
    case Format::f32: break;
  }
  return "f32";
}

/// "f32", "bf16" or "int8" → the format decoding's matrices are stored in (the `--weights`
/// flag); anything else is refused with the accepted names.
inline Format parse_weight_type(std::string_view s) {
  for (auto f : {Format::f32, Format::bf16, Format::int8})
    if (s == format_name(f)) return f;
  throw DomainError("causalqwen::parse_weight_type: unknown weight type '" + std::string(s) +
                    "': expected f32, bf16 or int8");
}

/// "f32" or "bf16" → the arithmetic of training products (the `--precision` flag); anything else,
/// int8 included, is refused with the accepted names.
inline Format parse_precision(std::string_view s) {
  if (s == "f32") return Format::f32;
  if (s == "bf16") return Format::bf16;
  throw DomainError("causalqwen::parse_precision: unknown precision '" + std::string(s) + "': expected f32 or bf16");
}

/// Whether `f` is an arithmetic of training products:  f ∈ {f32, bf16}.
constexpr bool is_product_format(Format f) { return f == Format::f32 || f == Format::bf16; }

/// Refuses, as function `fn`, a format that is not an arithmetic of training products
/// (f ∉ {f32, bf16}: int8 stores decoding's copies only).
inline void require_product_format(Format f, const char* fn) {
  detail::require(is_product_format(f), fn, "training products run in f32 or bf16, not {}", format_name(f));
}

}  // namespace causalqwen::linalg
