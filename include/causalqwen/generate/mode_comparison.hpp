/// The four modes side by side on the same prompt: each mode's continuation (sampling and causal
/// with several draws, compatible greedy), and per step the token, P(<NUM>) and the head's
/// predicted number with its scale. `print_mode_showcase` is the compact form for a few prompts
/// (used at the end of the demo).
#pragma once
#include "causalqwen/generate/text_generation.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <vector>

namespace causalqwen::generate {

struct ModeComparisonOptions {
  std::size_t samples = 2;          // draws shown for sampling and causal
  std::size_t max_new_tokens = 24;
  double temperature = 1.0;         // sampling mode's T
  std::uint64_t seed = 0;
  bool per_step = true;             // the per-step table (P(<NUM>), numbers)
  RenderOptions render{Uncertainty::plus_minus};
};

/// One labelled continuation of a comparison.
struct ModeRun {
  std::string label;
  TextResult result;
};

/// Runs every mode on `prompt` (see the file comment).
template <class T>
std::vector<ModeRun> compare_modes(model::CausalQwen<T>& model, const text::Tokenizer& tok, const std::string& prompt,
                                   const ModeComparisonOptions& o) {
  TextGenerator<T> gen(model, tok);
  std::vector<ModeRun> runs;
  auto run = [&](generate::GenerationMode mode, double temperature, std::size_t draws) {
    TextGenerationOptions t;
    t.generation.decode.mode = mode;
    t.generation.decode.temperature = temperature;
    t.generation.max_new_tokens = o.max_new_tokens;
    t.render = o.render;
    t.seed = o.seed;
    const std::vector<std::string> batch(draws, prompt);  // draw i = row i's own stream
    auto results = gen.run(batch, t);
    for (std::size_t i = 0; i < draws; ++i)
      runs.push_back({std::string(generate::mode_name(mode)) + (draws > 1 ? fmt::format(" #{}", i + 1) : ""),
                      std::move(results[i])});
  };
  run(generate::GenerationMode::deterministic, 0, 1);
  run(generate::GenerationMode::sampling, o.temperature, o.samples);
  run(generate::GenerationMode::causal, 0, o.samples);
  run(generate::GenerationMode::compatible, 0, 1);
  return runs;
}

/// Prints compare_modes' runs: continuations, then (per_step) one table row per step with, for
/// every run, the token's text, P(<NUM>) and the predicted number ± its scale.
template <class T>
void print_mode_comparison(std::FILE* out, model::CausalQwen<T>& model, const text::Tokenizer& tok,
                           const std::string& prompt, const ModeComparisonOptions& o) {
  const auto runs = compare_modes(model, tok, prompt, o);
  fmt::print(out, "prompt: {}\n", prompt);
  std::size_t width = 0;
  for (const auto& r : runs) width = std::max(width, r.label.size());
  for (const auto& r : runs) fmt::print(out, "  {:<{}}  {}\n", r.label, width, r.result.text);
  if (!o.per_step) return;
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
      std::string word = t.id == tok.num_token_id() ? "<NUM>" : render_tokens(tok, {t}, {});
      for (auto& c : word)
        if (c == '\n') c = ' ';
      if (word.size() > 10) {  // cut on a UTF-8 character boundary
        std::size_t cut = 10;
        while (cut > 0 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;
        word.resize(cut);
      }
      const std::string cell = fmt::format("{:<10} {:.3f} {}±{}", fmt::format("'{}'", word), t.p_num,
                                           text::format_number(t.value, {4}), text::format_number(t.scale, {2}));
      fmt::print(out, " | {:<30}", cell);
    }
    fmt::print(out, "\n");
  }
}

/// For each prompt, its continuation in all four modes (compact; the demo's last part).
template <class T>
void print_mode_showcase(std::FILE* out, model::CausalQwen<T>& model, const text::Tokenizer& tok,
                         const std::vector<std::string>& prompts, ModeComparisonOptions o = {}) {
  o.per_step = false;
  for (const auto& p : prompts) {
    print_mode_comparison(out, model, tok, p, o);
    fmt::print(out, "\n");
  }
}

}  // namespace causalqwen::generate
