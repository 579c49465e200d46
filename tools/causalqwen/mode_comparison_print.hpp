// The causalqwen program's printout of generate::compare_modes: every mode's continuation of a
// prompt side by side and, per step, each run's token, P(<NUM>) and predicted number ± scale
// (the compare-modes command); print_mode_showcase is the compact form for a few prompts (the
// end of the demo).
#pragma once
#include <causalqwen/generate/mode_comparison.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace cqcli {

/// Runs compare_modes and prints its runs: the continuations, then (per_step) one table row per
/// step with, for every run, the token's text, P(<NUM>) and the predicted number ± its scale.
template <class T>
void print_mode_comparison(std::FILE* out, causalqwen::model::CausalQwen<T>& model, const causalqwen::text::Tokenizer& tok,
                           const std::string& prompt, const causalqwen::generate::ModeComparisonOptions& o,
                           bool per_step = true) {
  namespace cqg = causalqwen::generate;
  const auto runs = cqg::compare_modes(model, tok, prompt, o);
  fmt::print(out, "prompt: {}\n", prompt);
  std::size_t width = 0;
  for (const auto& r : runs) width = std::max(width, r.label.size());
  for (const auto& r : runs) fmt::print(out, "  {:<{}}  {}\n", r.label, width, r.result.text);
  if (!per_step) return;
  const auto st = cqg::mode_statistics(runs);
  const std::string where = st.sampling_differ_share > 0
                                ? fmt::format("tokens differ at {:.0f}% of the aligned steps, first at step {:.1f} on average",
                                              100 * st.sampling_differ_share, st.sampling_first_difference)
                                : std::string("tokens never differ over the aligned steps");
  fmt::print(out, "\nsampling vs deterministic ({} draws at T = {}): {}; at step 0 (same context) {:.0f}% of the draws choose "
                  "another token, and the head's number moves by {} on average\n",
             st.sampling_draws, o.temperature, where, 100 * st.sampling_step0_differ_share,
             causalqwen::text::format_number(st.sampling_step0_value_gap, {4}));
  fmt::print(out, "causal ({} draws): {} distinct tokens at step 0, {:.2f} per step on average, {} distinct continuations\n",
             st.causal_draws, st.causal_step0_distinct, st.causal_mean_distinct, st.causal_distinct_continuations);
  fmt::print(out, "\nper step: token | P(<NUM>) | number ± scale\n{:>4}", "step");
  for (const auto& r : runs) fmt::print(out, " | {:<30}", r.label);
  fmt::print(out, "\n");
  std::size_t steps = 0;
  for (const auto& r : runs) steps = std::max(steps, r.result.generation.tokens.size());
  for (std::size_t s = 0; s < steps; ++s) {
    fmt::print(out, "{:>4}", s);
    for (const auto& r : runs) {
      const auto& toks = r.result.generation.tokens;
      if (s >= toks.size()) {
        fmt::print(out, " | {:<30}", "");
        continue;
      }
      const auto& t = toks[s];
      std::string word = t.id == tok.num_token_id() ? "<NUM>" : cqg::render_tokens(tok, {t}, {});
      for (auto& c : word)
        if (c == '\n') c = ' ';
      if (word.size() > 10) {  // cut on a UTF-8 character boundary
        std::size_t cut = 10;
        while (cut > 0 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;
        word.resize(cut);
      }
      const std::string cell = fmt::format("{:<10} {:.3f} {}±{}", fmt::format("'{}'", word), t.p_num,
                                           causalqwen::text::format_number(t.value, {4}), causalqwen::text::format_number(t.scale, {2}));
      fmt::print(out, " | {:<30}", cell);
    }
    fmt::print(out, "\n");
  }
}

/// For each prompt, its continuation in all four modes (compact; the demo's last part).
template <class T>
void print_mode_showcase(std::FILE* out, causalqwen::model::CausalQwen<T>& model, const causalqwen::text::Tokenizer& tok,
                         const std::vector<std::string>& prompts, const causalqwen::generate::ModeComparisonOptions& o = {}) {
  for (const auto& p : prompts) {
    print_mode_comparison(out, model, tok, p, o, /*per_step=*/false);
    fmt::print(out, "\n");
  }
}

}  // namespace cqcli
