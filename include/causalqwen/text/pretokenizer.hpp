/// The `Split` pre-tokenizer: a regular expression (PCRE2, UTF + UCP mode, JIT-compiled) cuts
/// text into pieces; with behaviour "Isolated" both the matches and the gaps between them are
/// pieces, in order. Qwen2's pattern is
///   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
///
/// The reference implementation runs the pattern as an ECMAScript regex, so two details are
/// translated to keep the same pieces (see js_compatible_pattern): `\s` is ECMAScript's white
/// space (which has U+FEFF but neither U+0085 nor U+180E, unlike PCRE2's), and the
/// case-insensitive contraction group becomes explicit ASCII case pairs (so "'ſ" is not a
/// contraction).
#pragma once
#include <causalqwen/core/error.hpp>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace causalqwen::text {

/// ECMAScript's `\s` (WhiteSpace ∪ LineTerminator) as the inside of a PCRE2 character class.
inline constexpr std::string_view js_white_space_class =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}\\x{FEFF}";

/// The pattern rewritten so that PCRE2 splits as the ECMAScript reference does: the
/// contraction group `(?i:'s|'t|'re|'ve|'m|'ll|'d)` becomes ASCII case pairs, `\s` becomes
/// js_white_space_class (inside or outside a class) and `\S` outside a class its complement.
inline std::string js_compatible_pattern(std::string_view pattern) {
  std::string p(pattern);
  const std::string contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  for (std::size_t at = p.find(contraction); at != std::string::npos; at = p.find(contraction, at))
    p.replace(at, contraction.size(), "(?:'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))");
  std::string out;
  out.reserve(p.size() + 256);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        if (in_class) out.append(js_white_space_class);
        else out.append("[").append(js_white_space_class).append("]");
      } else if (e == 'S' && !in_class) {
        out.append("[^").append(js_white_space_class).append("]");
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);  // literal ']' first
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

/// A compiled split pattern. Thread-safe: matching state lives in per-thread scratch.
class RegexSplitter {
 public:
  /// Compiles `pattern` (after js_compatible_pattern when `js_compatible`); `where` names the
  /// file and field for the FormatError thrown when PCRE2 rejects it.
  RegexSplitter(std::string_view pattern, const std::string& where, bool js_compatible = true) {
    const std::string p = js_compatible ? js_compatible_pattern(pattern) : std::string(pattern);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof message);
      throw FormatError(where + ": invalid regular expression at offset " +
                        std::to_string(error_offset) + ": " +
                        reinterpret_cast<const char*>(message));
    }
    code_.reset(code);
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  }

  /// Calls piece(begin, end) for every piece of `text` (byte offsets), matches and gaps alike,
  /// in order, skipping empty ones. Precondition: `text` is well-formed UTF-8.
  template <class OnPiece>
  void split(std::string_view text, OnPiece&& piece) const {
    Scratch& s = scratch();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t previous_end = 0, start = 0;
    while (start <= text.size()) {
      int rc = jit_ ? pcre2_jit_match(code_.get(), subject, text.size(), start, 0, s.match.get(),
                                      s.context.get())
                    : -1;
      if (!jit_ || rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code_.get(), subject, text.size(), start,
                         PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         s.match.get(), s.context.get());
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw DomainError(std::string("causalqwen::text::RegexSplitter::split: ") +
                          reinterpret_cast<const char*>(message));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match.get());
      const std::size_t begin = ov[0], end = ov[1];
      if (begin > previous_end) piece(previous_end, begin);
      if (end > begin) {
        piece(begin, end);
        previous_end = end;
        start = end;
      } else {  // an empty match: step over one code point
        previous_end = std::max(previous_end, begin);
        if (begin >= text.size()) break;
        std::size_t next = begin + 1;
        while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
        start = next;
      }
    }
    if (previous_end < text.size()) piece(previous_end, text.size());
  }

 private:
  struct CodeFree { void operator()(pcre2_code* c) const { pcre2_code_free(c); } };
  struct MatchFree { void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); } };
  struct ContextFree { void operator()(pcre2_match_context* m) const { pcre2_match_context_free(m); } };
  struct StackFree { void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); } };

  /// Per-thread match data, JIT stack (up to 16 MiB for long runs of white space) and context.
  struct Scratch {
    std::unique_ptr<pcre2_match_data, MatchFree> match{pcre2_match_data_create(16, nullptr)};
    std::unique_ptr<pcre2_jit_stack, StackFree> stack{pcre2_jit_stack_create(32 * 1024, 16 << 20, nullptr)};
    std::unique_ptr<pcre2_match_context, ContextFree> context{[this] {
      pcre2_match_context* c = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(c, nullptr, stack.get());
      return c;
    }()};
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }

  std::unique_ptr<pcre2_code, CodeFree> code_;
  bool jit_ = false;
};

}  // namespace causalqwen::text
