/// The element types of a safetensors file: their names in the header ("F32", "BF16", …),
/// their sizes in bytes, and the order in which the safetensors library lays tensors out.
#pragma once
#include "causalqwen/core/error.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace causalqwen::format {

/// The dtypes this library reads. F32, F64, BF16 and F16 convert to float/double; the integer
/// kinds (and BOOL, one byte 0 or 1) convert to int64.
enum class Dtype { F64, F32, BF16, F16, I64, I32, I16, I8, U8, BOOL };

inline constexpr std::array<Dtype, 10> all_dtypes = {Dtype::F64, Dtype::F32, Dtype::BF16,
                                                     Dtype::F16, Dtype::I64, Dtype::I32,
                                                     Dtype::I16, Dtype::I8,  Dtype::U8,
                                                     Dtype::BOOL};

/// The dtype's name as written in a safetensors header ("F32", "BF16", …).
constexpr std::string_view dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::F64: return "F64";
    case Dtype::F32: return "F32";
    case Dtype::BF16: return "BF16";
    case Dtype::F16: return "F16";
    case Dtype::I64: return "I64";
    case Dtype::I32: return "I32";
    case Dtype::I16: return "I16";
    case Dtype::I8: return "I8";
    case Dtype::U8: return "U8";
    case Dtype::BOOL: return "BOOL";
  }
  return "?";
}

/// Bytes per element.
constexpr std::size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::F64:
    case Dtype::I64: return 8;
    case Dtype::F32:
    case Dtype::I32: return 4;
    case Dtype::BF16:
    case Dtype::F16:
    case Dtype::I16: return 2;
    case Dtype::I8:
    case Dtype::U8:
    case Dtype::BOOL: return 1;
  }
  return 0;
}

/// True for F64, F32, BF16, F16 (the dtypes `read<float|double>` accepts).
constexpr bool is_floating(Dtype dtype) {
  return dtype == Dtype::F64 || dtype == Dtype::F32 || dtype == Dtype::BF16 ||
         dtype == Dtype::F16;
}

/// The dtype named `name` in a header, or nothing for a name this library does not know.
inline std::optional<Dtype> parse_dtype(std::string_view name) {
  for (Dtype d : all_dtypes)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

/// "F64, F32, BF16, …" for error messages.
inline std::string known_dtype_names() {
  std::string out;
  for (Dtype d : all_dtypes) {
    if (!out.empty()) out += ", ";
    out += dtype_name(d);
  }
  return out;
}

/// The rank of the dtype in the Rust `safetensors::Dtype` enumeration (BOOL < U8 < I8 < I16 <
/// F16 < BF16 < I32 < F32 < F64 < I64). The Python library writes tensors by descending rank,
/// then by name, so that every tensor's data is aligned to its element size; the writer here
/// does the same, giving byte-identical files.
constexpr int safetensors_rank(Dtype dtype) {
  switch (dtype) {
    case Dtype::BOOL: return 0;
    case Dtype::U8: return 1;
    case Dtype::I8: return 2;
    case Dtype::I16: return 3;
    case Dtype::F16: return 4;
    case Dtype::BF16: return 5;
    case Dtype::I32: return 6;
    case Dtype::F32: return 7;
    case Dtype::F64: return 8;
    case Dtype::I64: return 9;
  }
  return -1;
}

}  // namespace causalqwen::format
