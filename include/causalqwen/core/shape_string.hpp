/// Extents as text for error messages: shape_string({2, 5, 8}) == "[2,5,8]", "[]" for a scalar.
#pragma once
#include <fmt/format.h>

#include <cstddef>
#include <span>
#include <string>

namespace causalqwen {

/// "[2,5,8]" (or "[]" for a scalar) from any contiguous extents: a Shape<N>, a std::vector, …
inline std::string shape_string(std::span<const std::size_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out.push_back(',');
    out.append(fmt::format("{}", shape[i]));
  }
  out.push_back(']');
  return out;
}

}  // namespace causalqwen
