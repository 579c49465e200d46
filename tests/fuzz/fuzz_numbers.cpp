// Text → find_numbers: every match lies inside the text and has a finite value; each value,
// written by format_number at 1–17 digits, is read back as exactly one number.
#include "fuzz_target.hpp"

#include <causalqwen/text/numbers.hpp>
#include <causalqwen/text/utf8.hpp>

#include <cmath>
#include <cstdlib>

void run_one(std::string_view bytes) {
  namespace text = causalqwen::text;
  if (text::find_invalid_utf8(bytes) != std::string_view::npos) return;  // find_numbers takes UTF-8
  for (const auto& m : text::find_numbers(bytes)) {
    if (m.begin >= m.end || m.end > bytes.size() || !std::isfinite(m.value)) std::abort();
    for (int digits = 1; digits <= 17; ++digits) {
      const std::string written = text::format_number(m.value, {digits});
      const auto back = text::find_numbers(written);
      if (back.size() != 1 || back[0].begin != 0 || back[0].end != written.size()) std::abort();
    }
  }
}
