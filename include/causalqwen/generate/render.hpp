/// Generated tokens back into text: a generated <NUM> is written as its number (loc_Y, or y in
/// causal mode) by the tokenizer's format_number, optionally with its uncertainty from the
/// Cauchy scale γ of that number:
///   plus_minus  "42.3 (±1.2)"              (± γ: the half-width of the central 50 % interval)
///   interval    "42.3 [38.1, 46.5]"        the central `coverage` interval loc ± γ·tan(π·coverage/2),
///                                          or [l, u] = interval_of(loc, γ) when that is given (a
///                                          recalibrated interval)
/// With a width limit (max_width, or max_relative_width times |loc|), a number whose central
/// interval at `coverage` is wider is written as `unknown_text` instead, with nothing after it.
/// Special tokens (EOS, …) are left out of the text.
#pragma once
#include "causalqwen/generate/generator.hpp"
#include "causalqwen/text/numbers.hpp"
#include "causalqwen/text/tokenizer.hpp"

#include <cmath>
#include <functional>
#include <numbers>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace causalqwen::generate {

enum class Uncertainty { none, plus_minus, interval };

/// The central interval [l, u] of a number predicted as (loc, scale), at the level RenderOptions::coverage.
using IntervalOf = std::function<std::pair<double, double>(double loc, double scale)>;

struct RenderOptions {
  Uncertainty uncertainty = Uncertainty::none;
  double coverage = 0.9;  // interval and width limit: the central probability mass
  text::NumberFormat value_format{};
  text::NumberFormat scale_format{2};
  IntervalOf interval_of{};                   // empty: loc ± scale·tan(π·coverage/2)
  std::optional<double> max_width{};          // a number whose interval is wider is unknown_text
  std::optional<double> max_relative_width{}; // … or wider than this times |loc|
  std::string unknown_text = "unknown";

  /// The central interval of (loc, scale) at `coverage`.
  std::pair<double, double> interval(double loc, double scale) const {
    if (interval_of) return interval_of(loc, scale);
    const double half = scale * std::tan(std::numbers::pi * coverage / 2);
    return {loc - half, loc + half};
  }
  /// Whether the number (loc, scale) is to be written as unknown_text: its interval is wider than
  /// max_width or than max_relative_width·|loc|.
  bool too_wide(double loc, double scale) const {
    if (!max_width && !max_relative_width) return false;
    const auto [lower, upper] = interval(loc, scale);
    const double width = upper - lower;
    if (!(width == width)) return true;  // NaN: no usable interval
    return (max_width && width > *max_width) || (max_relative_width && width > *max_relative_width * std::fabs(loc));
  }
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
  const bool gated = o.max_width || o.max_relative_width;
  if (o.uncertainty != Uncertainty::interval && !gated) {
    text::NumberDecodeOptions d;
    d.skip_special_tokens = true;
    d.value_format = o.value_format;
    d.scale_format = o.scale_format;
    if (o.uncertainty == Uncertainty::plus_minus) d.scales = scales;
    return tok.decode_with_numbers(ids, values, d);
  }
  // interval or a width limit: the text between numbers decoded piece by piece (a <NUM> is a
  // token boundary and the text around it was encoded as if <NUM> were an added token, so no
  // character is cut)
  std::string out;
  std::size_t begin = 0;
  const auto flush = [&](std::size_t end) {
    if (end > begin)
      out += tok.decode(std::span<const text::TokenId>(ids.data() + begin, end - begin), {.skip_special_tokens = true});
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != tok.num_token_id()) continue;
    flush(i);
    begin = i + 1;
    if (o.too_wide(values[i], scales[i])) {
      out += o.unknown_text;
      continue;
    }
    out += text::format_number(values[i], o.value_format);
    if (o.uncertainty == Uncertainty::plus_minus) {
      out += " (\xC2\xB1" + text::format_number(scales[i], o.scale_format) + ")";
    } else if (o.uncertainty == Uncertainty::interval) {
      const auto [lower, upper] = o.interval(values[i], scales[i]);
      out += " [" + text::format_number(lower, o.scale_format) + ", " + text::format_number(upper, o.scale_format) + "]";
    }
  }
  flush(ids.size());
  return out;
}

}  // namespace causalqwen::generate
