// causalqwen bpe --corpus FILE.jsonl --vocab-size N --out tokenizer.json [--min-frequency F]
//                [--special TOKEN]... [--keep-numbers]
//
// Trains a byte-level BPE tokenizer (text/bpe_trainer.hpp) on the "text" of every line of a
// JSONL file and writes a Hugging Face tokenizer.json that text::Tokenizer loads. Numbers are
// cut out before counting (each is one <NUM> at run time), unless --keep-numbers.
//   causalqwen bpe --corpus train.jsonl --vocab-size 512 --out tokenizer.json
#include "command.hpp"
#include "numeric_options.hpp"

#include <causalqwen/core/json.hpp>
#include <causalqwen/format/atomic_file.hpp>
#include <causalqwen/text/bpe_trainer.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>

#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace {

struct BpeArgs {
  std::string corpus, out;
  std::size_t vocab_size = 1024, min_frequency = 2;
  std::vector<std::string> specials = {"<|endoftext|>"};
  bool keep_numbers = false;
};

void run_bpe(const BpeArgs& a) {
  namespace tx = causalqwen::text;
  for (std::size_t i = 0; i < a.specials.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (a.specials[i] == a.specials[j])
        throw causalqwen::DomainError(fmt::format("bpe: --special '{}' is given twice: each special token has one id",
                                                  causalqwen::json::escaped(a.specials[i])));
  const auto start = std::chrono::steady_clock::now();
  const auto texts = causalqwen::train::read_jsonl_texts(a.corpus);
  tx::BpeTrainerOptions options;
  options.vocab_size = a.vocab_size;
  options.min_frequency = a.min_frequency;
  options.special_tokens = a.specials;
  options.remove_numbers = !a.keep_numbers;
  const auto trained = tx::train_bpe(texts, options);
  const std::string json = trained.text();
  const auto tokenizer = trained.tokenizer();  // the file must load before it is written
  causalqwen::format::write_file_atomically(a.out, [&](causalqwen::format::AtomicFile& f) { f.write(json); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("trained on {} texts ({} pieces, {} distinct, {} numbers cut out): {} merges, vocabulary "
             "{} + <NUM> = id {}; wrote {} in {:.2f} s\n",
             trained.stats.texts, trained.stats.pieces, trained.stats.distinct_pieces,
             trained.stats.numbers_removed, trained.stats.merges, trained.stats.vocab_size,
             tokenizer.num_token_id(), a.out, seconds);
}

const cqcli::Registration reg_bpe{"bpe", [](CLI::App& app) {
  auto* sub = app.add_subcommand("bpe", "Train a byte-level BPE tokenizer.json on a JSONL corpus");
  auto a = std::make_shared<BpeArgs>();
  sub->add_option("--corpus", a->corpus, "JSONL file, {\"text\": ...} per line")->required()->check(CLI::ExistingFile);
  cqcli::add_integer(sub, "--vocab-size", a->vocab_size, {1, std::int64_t{1} << 26},
                     "256 bytes + merged tokens + special tokens (<NUM> on top)", false)
      ->required();
  sub->add_option("--out", a->out, "Output tokenizer.json")->required();
  cqcli::add_integer(sub, "--min-frequency", a->min_frequency, {1, std::numeric_limits<std::int64_t>::max()},
                     "Pairs seen fewer times are never merged");
  sub->add_option("--special", a->specials, "Special (added) tokens, in id order")->capture_default_str();
  sub->add_flag("--keep-numbers", a->keep_numbers, "Train on the numbers' digits too (by default they are cut out)");
  sub->callback([a] { run_bpe(*a); });
}};

}  // namespace
