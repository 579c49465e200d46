/// The four modes side by side on the same prompt: compare_modes runs deterministic (one
/// draw), sampling (`samples` draws at `temperature`), causal (`samples` draws) and compatible
/// greedy (one draw), each continuation with its tokens, P(<NUM>) and the head's predicted
/// number and scale per step; a prompt too long for max_sequence_length is refused or cut as in
/// TextGenerator. It computes only; the causalqwen program prints the table.
///
/// mode_statistics gives the sampling specification's quantitative checks of such runs:
///   sampling against deterministic: over the sampling draws, the share of aligned steps (up to
///   the shorter continuation) whose token differs from the deterministic one; the mean step of
///   the first difference (a draw that never differs counts its aligned length); and at step 0,
///   where every run sees the same context, the share of draws choosing another token and the
///   mean |value − deterministic value| of the head's number (the noise moves it);
///   causal: the distinct tokens at step 0 over the draws, the mean over steps of the distinct
///   tokens per step (over the draws long enough), and the distinct continuations.
#pragma once
#include "causalqwen/generate/text_generation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace causalqwen::generate {

struct ModeComparisonOptions {
  std::size_t samples = 2;          // draws shown for sampling and causal
  std::size_t max_new_tokens = 24;
  double temperature = 1.0;         // sampling mode's T
  std::uint64_t seed = 0;
  RenderOptions render{Uncertainty::plus_minus};  // how each continuation's numbers are written
  /// The longest sequence the model takes (e.g. config.json's max_position_embeddings; 0: no
  /// limit) and what a prompt too long for it gets, as in TextGenerationOptions.
  std::size_t max_sequence_length = 0;
  LongPrompt long_prompt = LongPrompt::error;
};

/// One labelled continuation of a comparison.
struct ModeRun {
  std::string label;
  TextResult result;
  GenerationMode mode = GenerationMode::deterministic;
};

/// The quantitative checks of a comparison (see the file comment); zero where a mode is absent.
struct ModeStatistics {
  std::size_t sampling_draws = 0, causal_draws = 0;
  double sampling_differ_share = 0;      // differing aligned steps / aligned steps
  double sampling_first_difference = 0;  // mean step of the first difference
  double sampling_step0_differ_share = 0;
  double sampling_step0_value_gap = 0;   // mean |value − deterministic value| at step 0
  std::size_t causal_step0_distinct = 0;
  double causal_mean_distinct = 0;
  std::size_t causal_distinct_continuations = 0;
};

/// The statistics of `runs` against their (first) deterministic run (see the file comment).
inline ModeStatistics mode_statistics(const std::vector<ModeRun>& runs) {
  ModeStatistics s;
  const auto det = std::find_if(runs.begin(), runs.end(), [](const ModeRun& r) { return r.mode == GenerationMode::deterministic; });
  std::vector<const std::vector<GeneratedToken>*> causal;
  std::size_t aligned = 0, differing = 0;
  double first_sum = 0, gap_sum = 0;
  std::size_t step0_differ = 0, step0_count = 0;
  for (const auto& r : runs) {
    const auto& tokens = r.result.generation.tokens;
    if (r.mode == GenerationMode::causal) causal.push_back(&tokens);
    if (r.mode != GenerationMode::sampling || det == runs.end()) continue;
    ++s.sampling_draws;
    const auto& reference = det->result.generation.tokens;
    const std::size_t n = std::min(tokens.size(), reference.size());
    std::size_t first = n;
    for (std::size_t i = 0; i < n; ++i)
      if (tokens[i].id != reference[i].id) {
        ++differing;
        first = std::min(first, i);
      }
    aligned += n;
    first_sum += static_cast<double>(first);
    if (n > 0) {
      ++step0_count;
      step0_differ += tokens[0].id != reference[0].id;
      gap_sum += std::fabs(tokens[0].value - reference[0].value);
    }
  }
  if (aligned > 0) s.sampling_differ_share = static_cast<double>(differing) / static_cast<double>(aligned);
  if (s.sampling_draws > 0) s.sampling_first_difference = first_sum / static_cast<double>(s.sampling_draws);
  if (step0_count > 0) {
    s.sampling_step0_differ_share = static_cast<double>(step0_differ) / static_cast<double>(step0_count);
    s.sampling_step0_value_gap = gap_sum / static_cast<double>(step0_count);
  }
  s.causal_draws = causal.size();
  std::set<std::vector<std::int64_t>> continuations;
  std::size_t longest = 0;
  for (const auto* tokens : causal) {
    std::vector<std::int64_t> ids;
    for (const auto& t : *tokens) ids.push_back(t.id);
    continuations.insert(std::move(ids));
    longest = std::max(longest, tokens->size());
  }
  s.causal_distinct_continuations = continuations.size();
  double distinct_sum = 0;
  for (std::size_t i = 0; i < longest; ++i) {
    std::set<std::int64_t> at;
    for (const auto* tokens : causal)
      if (i < tokens->size()) at.insert((*tokens)[i].id);
    if (i == 0) s.causal_step0_distinct = at.size();
    distinct_sum += static_cast<double>(at.size());
  }
  if (longest > 0) s.causal_mean_distinct = distinct_sum / static_cast<double>(longest);
  return s;
}

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
    t.max_sequence_length = o.max_sequence_length;
    t.long_prompt = o.long_prompt;
    const std::vector<std::string> batch(draws, prompt);  // draw i = row i's own stream
    auto results = gen.run(batch, t);
    for (std::size_t i = 0; i < draws; ++i)
      runs.push_back({std::string(generate::mode_name(mode)) + (draws > 1 ? fmt::format(" #{}", i + 1) : ""),
                      std::move(results[i]), mode});
  };
  run(generate::GenerationMode::deterministic, 0, 1);
  run(generate::GenerationMode::sampling, o.temperature, o.samples);
  run(generate::GenerationMode::causal, 0, o.samples);
  run(generate::GenerationMode::compatible, 0, 1);
  return runs;
}

}  // namespace causalqwen::generate
