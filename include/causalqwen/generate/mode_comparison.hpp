/// The four modes side by side on the same prompt: compare_modes runs deterministic (one
/// draw), sampling (`samples` draws at `temperature`), causal (`samples` draws) and compatible
/// greedy (one draw), each continuation with its tokens, P(<NUM>) and the head's predicted
/// number and scale per step. It computes only; the causalqwen program prints the table.
#pragma once
#include "causalqwen/generate/text_generation.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace causalqwen::generate {

struct ModeComparisonOptions {
  std::size_t samples = 2;          // draws shown for sampling and causal
  std::size_t max_new_tokens = 24;
  double temperature = 1.0;         // sampling mode's T
  std::uint64_t seed = 0;
  RenderOptions render{Uncertainty::plus_minus};  // how each continuation's numbers are written
};

/// One labelled continuation of a comparison.
struct ModeRun {
  std::string label;
  TextResult result;
};

/// Runs every mode on `prompt` (see the file comment), in the order deterministic, sampling #1…,
/// causal #1…, compatible; draw i of a mode uses random stream i of `seed`.
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

}  // namespace causalqwen::generate
