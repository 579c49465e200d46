/// UTF-8 for the tokenizer: validation, the replacement policy for malformed input, and
/// code-point stepping. Malformed means "not well-formed" in the sense of Unicode §3.9
/// (table 3-7): overlong forms, surrogates, code points above U+10FFFF, stray or missing
/// continuation bytes.
#pragma once
#include <causalqwen/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace causalqwen::text {

/// What encode() does with malformed UTF-8 input.
enum class InvalidUtf8 {
  error,    ///< throw DomainError naming the byte offset (the default)
  replace,  ///< replace each maximal ill-formed subpart by U+FFFD (as WHATWG TextDecoder does)
};

namespace detail {
/// Length (1–4) of the well-formed UTF-8 sequence starting at s[i], or 0 when the bytes there
/// do not start one. `*subpart` (when given) receives the length of the maximal ill-formed
/// subpart (≥ 1) that U+FFFD replaces.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i,
                                        std::size_t* subpart = nullptr) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    if (subpart) *subpart = 1;
    return 0;
  }
  std::size_t k = 1;
  for (; k < need; ++k) {
    if (i + k >= s.size()) break;
    const unsigned char b = byte(i + k);
    const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need) return need;
  if (subpart) *subpart = k;
  return 0;
}
}  // namespace detail

/// Byte offset of the first malformed UTF-8 sequence in `s`, or std::string_view::npos.
inline std::size_t find_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = detail::utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

/// Copy of `s` with each maximal ill-formed subpart replaced by U+FFFD (EF BF BD).
inline std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t subpart = 0;
    const std::size_t n = detail::utf8_sequence_length(s, i, &subpart);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += subpart;
    }
  }
  return out;
}

/// The code point of the well-formed sequence at s[i]; advances i past it.
/// Precondition: s is well-formed UTF-8 and i < s.size().
inline char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[k])); };
  const char32_t b0 = b(i);
  if (b0 < 0x80) { i += 1; return b0; }
  if (b0 < 0xE0) { char32_t c = ((b0 & 0x1F) << 6) | (b(i + 1) & 0x3F); i += 2; return c; }
  if (b0 < 0xF0) {
    char32_t c = ((b0 & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
    i += 3;
    return c;
  }
  char32_t c = ((b0 & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) |
               (b(i + 3) & 0x3F);
  i += 4;
  return c;
}

/// The code point that ends just before byte offset i (0 when i == 0).
/// Precondition: s is well-formed UTF-8 and i is on a code-point boundary.
inline char32_t previous_code_point(std::string_view s, std::size_t i) {
  if (i == 0) return 0;
  std::size_t start = i - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return next_code_point(s, start);
}

/// Appends the UTF-8 encoding of code point c (c ≤ U+10FFFF, not a surrogate) to out.
inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace causalqwen::text
