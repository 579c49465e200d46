/// What the server says about each number a model writes: where it is in the rendered text, how
/// it was written, and its Cauchy predictive distribution Y ~ Cauchy(loc, scale) with
/// P(<NUM>) at that step and central intervals
///   level p:  loc ± m_p·scale·tan(π·p/2)
/// with m_p the model's recalibration multiplier (calibration.json, eval::central_interval, as
/// `causalqwen eval` and `generate` use) and m_p = 1 without one.
/// The offset is in bytes of the UTF-8 text rendered by generate::render_tokens, the text the
/// tokenizer's format_number wrote there.
#pragma once
#include "causalqwen/generate/render.hpp"
#include "causalqwen/eval/interval_calibration.hpp"
#include "causalqwen/text/numbers.hpp"

#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace causalqwen::serve {

struct NumberReport {
  std::size_t token_index = 0;  // index of the <NUM> among the generated tokens
  std::size_t text_offset = 0;  // byte offset in the rendered continuation
  std::string text;             // as written there
  double value = 0, loc = 0, scale = 0, p_num = 0;
  std::vector<std::pair<double, std::array<double, 2>>> intervals;  // (level, [lo, hi])
};

/// The central intervals of Cauchy(loc, scale) at `levels`, recalibrated by `calibration` when
/// given (DomainError for a level it has no multiplier for).
inline std::vector<std::pair<double, std::array<double, 2>>> central_intervals(
    double loc, double scale, std::span<const double> levels, const eval::IntervalCalibration* calibration = nullptr) {
  std::vector<std::pair<double, std::array<double, 2>>> out;
  for (const double p : levels) {
    const auto interval = eval::central_interval(loc, scale, p, calibration);
    out.push_back({p, {interval.lower, interval.upper}});
  }
  return out;
}

/// The reports of the generated <NUM> tokens with index ≥ first_token (see the file comment).
/// In every mode the number written is the head's value (loc_Y; causal: the individual's y),
/// reported as both value and loc, with its scale.
inline std::vector<NumberReport> generated_numbers(const text::Tokenizer& tok, const std::vector<generate::GeneratedToken>& tokens,
                                                   const generate::RenderOptions& render, std::span<const double> levels,
                                                   std::size_t first_token = 0,
                                                   const eval::IntervalCalibration* calibration = nullptr) {
  std::vector<NumberReport> out;
  for (std::size_t i = first_token; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    if (t.id != tok.num_token_id()) continue;
    NumberReport r;
    r.token_index = i;
    const std::vector<generate::GeneratedToken> before(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(i));
    r.text_offset = generate::render_tokens(tok, before, render).size();
    r.text = text::format_number(t.value, render.value_format);
    r.value = r.loc = t.value;
    r.scale = t.scale;
    r.p_num = t.p_num;
    r.intervals = central_intervals(t.value, t.scale, levels, calibration);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace causalqwen::serve
