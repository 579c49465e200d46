/// Extents as text for error messages: "[2,5,8]", "[]" for a scalar. `shape_text` wraps the
/// extents without formatting them, so a check that passes (detail::require formats its message
/// only on failure) costs a comparison and allocates nothing; `shape_string` makes the text now.
#pragma once
#include <fmt/format.h>

#include <cstddef>
#include <span>
#include <string>

namespace causalqwen {

/// Extents to be formatted by fmt ("{}" gives "[2,5,8]"); it refers to the extents, so it lives
/// no longer than the expression it is made in.
struct ShapeText {
  std::span<const std::size_t> extents;
};

/// The extents of any contiguous range (a Shape<N>, a std::vector, …), formatted when printed.
inline ShapeText shape_text(std::span<const std::size_t> shape) { return {shape}; }

}  // namespace causalqwen

/// "[2,5,8]": the extents separated by commas, in brackets.
template <>
struct fmt::formatter<causalqwen::ShapeText> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class Context>
  auto format(const causalqwen::ShapeText& s, Context& ctx) const {
    auto out = fmt::format_to(ctx.out(), "[");
    for (std::size_t i = 0; i < s.extents.size(); ++i) {
      if (i) *out++ = ',';
      out = fmt::format_to(out, "{}", s.extents[i]);
    }
    return fmt::format_to(out, "]");
  }
};

namespace causalqwen {

/// "[2,5,8]" (or "[]" for a scalar) now, as a string.
inline std::string shape_string(std::span<const std::size_t> shape) { return fmt::format("{}", shape_text(shape)); }

}  // namespace causalqwen
