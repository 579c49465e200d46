/// The byte-level alphabet of GPT-2-style BPE (used by Qwen2): every byte 0–255 is shown as
/// one printable code point, so that vocabulary strings contain no spaces or control
/// characters. Printable Latin-1 bytes (! … ~, ¡ … ¬, ® … ÿ) stand for themselves; the other
/// 68 bytes map, in increasing order, to U+0100, U+0101, … (space → U+0120 'Ġ').
#pragma once
#include <causalqwen/text/utf8.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace causalqwen::text {

/// The code point that stands for each byte in byte-level vocabulary strings.
inline const std::array<char32_t, 256>& byte_to_code_point() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    const auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

/// The byte a byte-level code point stands for, or -1 for a code point outside the alphabet.
inline int code_point_to_byte(char32_t c) {
  static const std::array<int16_t, 0x144> table = [] {
    std::array<int16_t, 0x144> t{};
    t.fill(-1);
    const auto& fwd = byte_to_code_point();
    for (int b = 0; b < 256; ++b) t[fwd[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

/// Raw bytes → byte-level string (each byte becomes its stand-in code point, in UTF-8).
inline std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_code_point()[b]);
  return out;
}

/// Byte-level string → raw bytes. Returns false (leaving `out` partial) when `text` is not
/// well-formed UTF-8 or contains a code point outside the byte-level alphabet; `*bad` then
/// receives that code point (0 for malformed UTF-8).
inline bool byte_level_to_bytes(std::string_view text, std::string& out, char32_t* bad = nullptr) {
  if (find_invalid_utf8(text) != std::string_view::npos) {
    if (bad) *bad = 0;
    return false;
  }
  std::size_t i = 0;
  while (i < text.size()) {
    const char32_t c = next_code_point(text, i);
    const int b = code_point_to_byte(c);
    if (b < 0) {
      if (bad) *bad = c;
      return false;
    }
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace causalqwen::text
