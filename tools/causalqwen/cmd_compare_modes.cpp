// causalqwen compare-modes --model DIR [--tokenizer FILE] --prompt TEXT [--samples N]
//                          [--max-new-tokens N] [--long-prompt error|keep-end] [--temperature T]
//                          [--seed S] [--dtype f32|f64]
//
// The continuations of every mode side by side (deterministic, N sampling draws, N causal
// draws, compatible greedy), then one row per step with each run's token, P(<NUM>) and the
// head's predicted number ± its scale. The model's position cap applies as in generate:
// --max-new-tokens at most max_position_embeddings (config.json's, or the default cap), and a
// prompt of P tokens with P + N − 1 positions past it refused (--long-prompt error, the default)
// or cut to its last tokens (keep-end).
#include "command.hpp"
#include "mode_comparison_print.hpp"
#include "model_loading.hpp"
#include "numeric_options.hpp"

#include <causalqwen/generate.hpp>

namespace {

namespace cq = causalqwen;
namespace cqg = causalqwen::generate;

struct CompareOptions {
  cqcli::ModelOptions model;
  std::string prompt, dtype = "f32", long_prompt = "error";
  cqg::ModeComparisonOptions compare;
};

template <class T>
void run_compare(const CompareOptions& o) {
  const auto tok_path = o.model.tokenizer_path();
  if (!tok_path) throw cq::FormatError("compare-modes needs a tokenizer: --tokenizer FILE or DIR/tokenizer.json");
  auto loaded = o.model.load<T>();
  // the position cap as generate applies it: --max-new-tokens within it, a prompt that with them
  // passes it refused (--long-prompt error) or cut to its end (keep-end)
  auto compare = o.compare;
  compare.max_sequence_length = cqcli::generation_position_cap(loaded, compare.max_new_tokens);
  compare.long_prompt = o.long_prompt == "keep-end" ? cqg::LongPrompt::keep_end : cqg::LongPrompt::error;
  // the tokenizer's <NUM> is the checkpoint's (config.json's num_token_id, or for a base model
  // --num-token-id / the first id after the tokenizer's vocabulary), so that a generated <NUM> is
  // rendered as its number whatever id the checkpoint gave it
  cq::text::TokenizerOptions tok_options;
  tok_options.num_token_id = static_cast<cq::text::TokenId>(loaded.model->config().num_token_id);
  const auto tok = cq::text::Tokenizer::from_file(tok_path->string(), tok_options);
  cqcli::print_mode_comparison(stdout, *loaded.model, tok, o.prompt, compare);
}

const cqcli::Registration reg_compare_modes{"compare-modes", [](CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* sub = app.add_subcommand("compare-modes", "continuations of every generation mode side by side, with P(<NUM>) and numbers per step");
  o->model.add_to(sub);
  sub->add_option("--prompt", o->prompt, "the prompt text")->required();
  cqcli::add_integer(sub, "--samples", o->compare.samples, {1, 1024}, "draws of the sampling and causal modes");
  cqcli::add_integer(sub, "--max-new-tokens", o->compare.max_new_tokens,
                     {0, static_cast<std::int64_t>(cqg::max_new_tokens_limit)}, "tokens per continuation");
  sub->add_option("--long-prompt", o->long_prompt,
                  "a prompt that with --max-new-tokens passes max_position_embeddings: error (default) | keep-end (drop its first tokens)")
      ->check(CLI::IsMember({"error", "keep-end"}));
  cqcli::add_real(sub, "--temperature", o->compare.temperature, cqcli::RealRange::non_negative(), "sampling mode's T");
  cqcli::add_integer(sub, "--seed", o->compare.seed, {0, cqcli::max_seed}, "seed of the random streams");
  sub->add_option("--dtype", o->dtype, "f32 | f64")->check(CLI::IsMember({"f32", "f64"}));
  sub->callback([o] {
    if (o->dtype == "f64") run_compare<double>(*o);
    else run_compare<float>(*o);
  });
}};

}  // namespace
