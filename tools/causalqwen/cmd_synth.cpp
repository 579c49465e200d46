// causalqwen synth --out FILE.jsonl [--count N] [--seed S] [--split train|val] [--mix demo|full]
//
// Writes the synthetic corpus (datasets/synthetic_text.hpp) as JSONL, one {"text": …, "group":
// template family} per line (the group is what `causalqwen eval` reports by):
// `count` sentences of one side of the split (no validation text ever appears in training).
//   causalqwen synth --out train.jsonl --count 20000 --seed 1
//   causalqwen synth --out val.jsonl --count 500 --seed 1 --split val
#include "command.hpp"
#include "numeric_options.hpp"

#include <causalqwen/train/jsonl_dataset.hpp>
#include <causalqwen/datasets/synthetic_text.hpp>

#include <fmt/core.h>

#include <memory>
#include <string>

namespace {

struct SynthArgs {
  std::string out, split = "train", mix = "demo";
  std::size_t count = 10000;
  std::uint64_t seed = 1;
};

void run_synth(const SynthArgs& a) {
  namespace tr = causalqwen::train;
  namespace ds = causalqwen::datasets;
  ds::SyntheticTextOptions options;
  if (a.mix == "full") options.mix = ds::SyntheticMix::full();
  const auto side = tr::parse_split(a.split);
  const auto sentences = ds::synthetic_sentences(side, a.count, a.seed, options);
  tr::JsonlRecords records{ds::texts_of(sentences), {}};
  for (const auto& s : sentences) records.groups.push_back(ds::family_name(s.family));
  tr::write_jsonl_records(a.out, records);
  std::size_t numbers = 0;
  for (const auto& s : sentences) numbers += s.numbers.size();
  fmt::print("wrote {} {} sentences ({} numbers, mix {}, seed {}) to {}\n", sentences.size(),
             tr::split_name(side), numbers, a.mix, a.seed, a.out);
}

const cqcli::Registration reg_synth{"synth", [](CLI::App& app) {
  auto* sub = app.add_subcommand("synth", "Write the synthetic text-with-numbers corpus as JSONL ({\"text\": ..., \"group\": family} per line)");
  auto a = std::make_shared<SynthArgs>();
  sub->add_option("--out", a->out, "Output JSONL file")->required();
  cqcli::add_integer(sub, "--count", a->count, {1, cqcli::max_count}, "Number of sentences");
  cqcli::add_integer(sub, "--seed", a->seed, {0, cqcli::max_seed}, "Seed of the generator");
  sub->add_option("--split", a->split, "Which side of the train/validation split")
      ->capture_default_str()->check(CLI::IsMember({"train", "val"}));
  sub->add_option("--mix", a->mix, "Template mix: demo (no 1e6..1e9 values) or full")
      ->capture_default_str()->check(CLI::IsMember({"demo", "full"}));
  sub->callback([a] { run_synth(*a); });
}};

}  // namespace
