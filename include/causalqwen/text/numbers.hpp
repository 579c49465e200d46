/// Numbers in text: where they are (find_numbers), what they are worth (parse_number_value),
/// and how a predicted value is written back (format_number).
///
/// What counts as one number (ASCII digits only; every rule has a test in tests/text):
///   integers and decimals        42, 3.14, .5, 007 (value 7, spelling kept)
///   a trailing dot               "5." only before an exponent or one of , ; : ) ] } %
///                                ("[5., 6.]"); before space or end of text the dot is
///                                sentence punctuation: "I have 5." → 5 and "."
///   scientific notation          6.02e23, 1E-9, 2.5e+3
///   thousands separators         1,234,567 (groups of exactly three after a first group of
///                                one to three digits); "1,2" and "1,234,5" are lists
///   a sign                       "+" or "-" glued to the digits and preceded by the start,
///                                white space or an opening/separating mark ( [ { < = : ; , / * ^ | & ! ? " ' ;
///                                after a digit, letter or closing mark it is a hyphen or an
///                                operator: "5-3" → 5, "-", 3
///   percentages                  "12.5%" → 12.5, the "%" stays text
///   dates and times              no special form: "2024-01-05" → 2024, "-", 01 (value 1),
///                                "-", 05; "12:30" → 12, ":", 30
///   glued to a word              digits right after a letter, digit or "_" of a space-separated
///                                script are part of the word and stay text, with any
///                                following ".digits" chain: "x2", "v1.2.3", "H2O", "COVID19";
///                                after CJK, kana, Hangul or Thai characters they are numbers
///                                ("有3个"). Letters after a number do not glue: "3kg" → 3, "kg"
///   dotted chains                "1.2.3", "192.168.0.1" (two or more dots) stay text
///   overflow                     a value beyond the double range ("1e400") stays text; an
///                                underflowing one ("1e-400") is a number with value 0
///   NaN / inf                    "NaN", "inf", "Infinity" are words and stay text: every
///                                <NUM> value is finite
#pragma once
#include <causalqwen/text/utf8.hpp>

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace causalqwen::text {

/// One recognised number: byte span [begin, end) of its spelling and its value.
struct NumberMatch {
  std::size_t begin = 0, end = 0;
  double value = 0.0;
};

namespace detail {
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool digit_at(std::string_view s, std::size_t i) { return i < s.size() && is_digit(s[i]); }
inline std::size_t count_digits(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (digit_at(s, j)) ++j;
  return j - i;
}

/// True when code point c glues a following digit to its word: "_", or a letter, mark or
/// number of a script written with spaces between words (below U+2E80 and outside Thai, Lao,
/// Myanmar, Khmer and Hangul Jamo).
inline bool glues_to_digits(char32_t c) {
  if (c == U'_') return true;
  if (c < 0x80) return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= U'0' && c <= U'9');
  if (c >= 0x2E80) return false;
  if ((c >= 0x0E00 && c <= 0x0EFF) || (c >= 0x1000 && c <= 0x109F) ||
      (c >= 0x1100 && c <= 0x11FF) || (c >= 0x1780 && c <= 0x17FF))
    return false;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_NO;  // L*, M*, N*
}

/// True when a "+" or "-" after code point c (0 = start of text) is a sign, not an operator.
inline bool sign_allowed_after(char32_t c) {
  if (c == 0) return true;
  if (c < 0x80) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return true;
    return std::string_view("([{<=:;,/*^|&!?\"'").find(static_cast<char>(c)) != std::string_view::npos;
  }
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP ||
         cat == UTF8PROC_CATEGORY_PS || cat == UTF8PROC_CATEGORY_PI;
}

/// End of the digit-and-dot chain \d+(\.\d+)* (or \.\d+(\.\d+)*) starting at i.
inline std::size_t skip_dotted_chain(std::string_view s, std::size_t i) {
  std::size_t j = i + count_digits(s, i);
  while (j < s.size() && s[j] == '.' && digit_at(s, j + 1)) j = j + 1 + count_digits(s, j + 1);
  return j;
}

/// End of the number spelled from i (sign, mantissa, exponent), or i when there is none.
inline std::size_t match_number_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
  const std::size_t leading = count_digits(s, j);
  if (leading > 0) {
    std::size_t k = j + leading;
    if (leading <= 3) {  // thousands groups: ,ddd not followed by a digit
      std::size_t g = k;
      bool grouped = false;
      while (g < s.size() && s[g] == ',' && count_digits(s, g + 1) == 3) {
        g += 4;
        grouped = true;
      }
      if (grouped && !(g < s.size() && s[g] == ',' && digit_at(s, g + 1))) k = g;
    }
    j = k;
    if (j < s.size() && s[j] == '.') {
      if (digit_at(s, j + 1)) {
        j = j + 1 + count_digits(s, j + 1);
      } else {
        const bool exponent_follows =
            j + 1 < s.size() && (s[j + 1] == 'e' || s[j + 1] == 'E') &&
            (digit_at(s, j + 2) || (j + 2 < s.size() && (s[j + 2] == '+' || s[j + 2] == '-') && digit_at(s, j + 3)));
        const bool closer_follows =
            j + 1 < s.size() && std::string_view(",;:)]}%").find(s[j + 1]) != std::string_view::npos;
        if (exponent_follows || closer_follows) ++j;
      }
    }
  } else if (j + 1 < s.size() && s[j] == '.' && digit_at(s, j + 1)) {
    j = j + 1 + count_digits(s, j + 1);
  } else {
    return i;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    std::size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (digit_at(s, k)) j = k + count_digits(s, k);
  }
  return j;
}

/// Decimal exponent of the leading non-zero digit of a cleaned spelling (no sign, no commas),
/// or nullopt when every digit is zero.
inline std::optional<long long> leading_decimal_exponent(std::string_view s) {
  std::size_t e = s.find_first_of("eE");
  long long exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view digits = s.substr(e + 1);
    bool negative = false;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    for (char c : digits) exponent = std::min<long long>(exponent * 10 + (c - '0'), 1'000'000'000LL);
    if (negative) exponent = -exponent;
  }
  const std::string_view mantissa = s.substr(0, e);
  const std::size_t dot = std::min(mantissa.find('.'), mantissa.size());
  for (std::size_t i = 0; i < mantissa.size(); ++i) {
    if (mantissa[i] == '.' || mantissa[i] == '0') continue;
    const long long position = i < dot ? static_cast<long long>(dot - i - 1) : -static_cast<long long>(i - dot);
    return position + exponent;
  }
  return std::nullopt;
}
}  // namespace detail

/// The value of a number spelled as find_numbers recognises it (sign, digits, thousands
/// commas, decimal point, exponent): the correctly rounded double, 0 for underflow, nullopt
/// when the magnitude overflows the double range or the spelling is not a number.
inline std::optional<double> parse_number_value(std::string_view spelling) {
  std::string cleaned;
  cleaned.reserve(spelling.size());
  for (char c : spelling)
    if (c != ',') cleaned.push_back(c);
  bool negative = false;
  std::string_view body = cleaned;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.empty() || body[0] == '+' || body[0] == '-') return std::nullopt;
  double value = 0.0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (ec == std::errc::result_out_of_range) {
    const auto exponent = detail::leading_decimal_exponent(body);
    if (exponent && *exponent > 0) return std::nullopt;  // overflow
    return 0.0;                                             // underflow
  }
  if (ec != std::errc() || end != body.data() + body.size()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return negative ? -value : value;
}

/// The numbers of `text` (well-formed UTF-8), in order, by the rules at the top of this file.
inline std::vector<NumberMatch> find_numbers(std::string_view text) {
  using namespace detail;
  std::vector<NumberMatch> found;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    const bool sign = (c == '+' || c == '-') &&
                      (digit_at(text, i + 1) || (i + 2 < n && text[i + 1] == '.' && digit_at(text, i + 2)));
    const bool starts = is_digit(c) || (c == '.' && digit_at(text, i + 1)) || sign;
    if (!starts) {
      ++i;
      continue;
    }
    const char32_t before = previous_code_point(text, i);
    if (sign && !sign_allowed_after(before)) {  // a hyphen or operator: the digits come next
      ++i;
      continue;
    }
    if (!sign && glues_to_digits(before)) {  // x2, v1.2.3: part of a word
      i = (c == '.') ? skip_dotted_chain(text, i + 1) : skip_dotted_chain(text, i);
      continue;
    }
    const std::size_t end = match_number_at(text, i);
    const std::size_t digits_from = sign ? i + 1 : i;
    if (end < n && text[end] == '.' && digit_at(text, end + 1)) {  // 1.2.3: a dotted chain
      i = skip_dotted_chain(text, text[digits_from] == '.' ? digits_from + 1 : digits_from);
      continue;
    }
    const auto value = parse_number_value(text.substr(i, end - i));
    if (!value) {  // overflow: the spelling stays text
      i = end;
      continue;
    }
    found.push_back({i, end, *value});
    i = end;
  }
  return found;
}

/// How format_number writes a value.
struct NumberFormat {
  int significant_digits = 6;  ///< digits kept after rounding (1–17)
};

/// `value` rounded to `significant_digits` and written so that find_numbers reads it back as
/// one number: plain decimals for 1e-4 ≤ |v| < 1e15 ("42.3", "1234570" for 1234567 at 6 digits, "0.00012"), otherwise
/// "m.mmme±x" without a "+" or leading zeros in the exponent ("6.02e23", "1.5e-7"); trailing
/// zeros are dropped. Non-finite values are written "nan", "inf", "-inf". Near the largest
/// double, where rounding up would overflow, the digits are cut toward zero instead
/// (1.7976931348623157e308 at 6 digits → "1.79769e308"), so every finite value reads back.
inline std::string format_number(double value, NumberFormat format = {}) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return "0";
  const int digits = std::clamp(format.significant_digits, 1, 17);
  const auto trim = [](std::string s) {
    if (s.find('.') == std::string::npos) return s;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  };
  // Round first, so that 999999.7 at 6 digits becomes 1e6 and chooses its notation as such.
  std::string scientific = fmt::format("{:.{}e}", value, digits - 1);
  double rounded = value;
  if (std::from_chars(scientific.data(), scientific.data() + scientific.size(), rounded).ec ==
      std::errc::result_out_of_range) {
    // Rounding carried the value past the largest double (1.797…e308 → 1.8e308, which no
    // reader can hold): cut the digits instead, toward zero, from the 17 that round-trip.
    const std::string exact = fmt::format("{:.16e}", value);  // -d.dddddddddddddddde+308
    const std::size_t lead = (value < 0 ? 1 : 0) + 1;         // sign and first digit
    scientific = exact.substr(0, digits > 1 ? lead + digits : lead) + exact.substr(exact.find('e'));
    std::from_chars(scientific.data(), scientific.data() + scientific.size(), rounded);
  }
  const double rounded_magnitude = std::fabs(rounded);
  if (rounded_magnitude >= 1e-4 && rounded_magnitude < 1e15) {
    const int exponent10 = static_cast<int>(std::floor(std::log10(rounded_magnitude)));
    const int decimals = std::max(0, digits - 1 - exponent10);
    std::string s = trim(fmt::format("{:.{}f}", rounded, decimals));
    return s == "-0" ? "0" : s;
  }
  std::string s = fmt::format("{:.{}e}", rounded, digits - 1);  // d.ddde±xx
  const auto e = s.find('e');
  std::string mantissa = trim(s.substr(0, e));
  std::string exponent = s.substr(e + 1);
  const bool negative_exponent = exponent[0] == '-';
  exponent.erase(0, 1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return mantissa + "e" + (negative_exponent ? "-" : "") + exponent;
}

}  // namespace causalqwen::text
