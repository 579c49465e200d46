/// Generated tokens back into text: a generated <NUM> is written as its number (loc_Y, or y in
/// causal mode) by the tokenizer's format_number, optionally with its uncertainty from the
/// Cauchy scale γ of that number:
///   plus_minus  "42.3 (±1.2)"              (± γ: the half-width of the central 50 % interval)
///   interval    "42.3 [38.1, 46.5]"        the central `coverage` interval loc ± γ·tan(π·coverage/2)
/// Special tokens (EOS, …) are left out of the text.
#pragma once
#include "causalqwen/generate/generator.hpp"
#include "causalqwen/text/numbers.hpp"
#include "causalqwen/text/tokenizer.hpp"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

namespace causalqwen::generate {

enum class Uncertainty { none, plus_minus, interval };

struct RenderOptions {
  Uncertainty uncertainty = Uncertainty::none;
  double coverage = 0.9;  // interval: the central probability mass shown
  text::NumberFormat value_format{};
  text::NumberFormat scale_format{2};
};

/// The text of generated tokens (see the file comment).
inline std::string render_tokens(const text::Tokenizer& tok, const std::vector<generate::GeneratedToken>& tokens,
                                 const RenderOptions& o = {}) {
  std::vector<text::TokenId> ids;
  std::vector<double> values, scales;
  for (const auto& t : tokens) {
    ids.push_back(static_cast<text::TokenId>(t.id));
    values.push_back(t.value);
    scales.push_back(t.scale);
  }
  if (o.uncertainty != Uncertainty::interval) {
    text::NumberDecodeOptions d;
    d.skip_special_tokens = true;
    d.value_format = o.value_format;
    d.scale_format = o.scale_format;
    if (o.uncertainty == Uncertainty::plus_minus) d.scales = scales;
    return tok.decode_with_numbers(ids, values, d);
  }
  // interval: the text between numbers decoded piece by piece (a <NUM> is a token boundary and
  // the text around it was encoded as if <NUM> were an added token, so no character is cut)
  const double half = std::tan(std::numbers::pi * o.coverage / 2);
  std::string out;
  std::size_t begin = 0;
  const auto flush = [&](std::size_t end) {
    if (end > begin)
      out += tok.decode(std::span<const text::TokenId>(ids.data() + begin, end - begin), {.skip_special_tokens = true});
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != tok.num_token_id()) continue;
    flush(i);
    out += text::format_number(values[i], o.value_format) + " [" +
           text::format_number(values[i] - scales[i] * half, o.scale_format) + ", " +
           text::format_number(values[i] + scales[i] * half, o.scale_format) + "]";
    begin = i + 1;
  }
  flush(ids.size());
  return out;
}

}  // namespace causalqwen::generate
