// The byte-level BPE trainer: loadable output, round trips (seen and unseen text, Chinese,
// emoji), compression, numbers cut out, determinism, speed, option errors.
#include "data_test_support.hpp"

#include <causalqwen/text/bpe_trainer.hpp>
#include <causalqwen/datasets/synthetic_text.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace cqdata;
using causalqwen::DomainError;

namespace {
/// Seeded random "words" over a small alphabet, so that the corpus has many distinct pieces.
std::vector<std::string> random_prose(std::uint64_t seed, std::size_t bytes) {
  tr::SplitMix64 rng(seed);
  static const std::vector<std::string> syllables = {"ka", "to", "ri", "mon", "sel", "an", "the", "ing",
                                                     "qu", "ex", "的", "是", "数", "字", "é", "ß"};
  std::vector<std::string> out;
  std::size_t total = 0;
  while (total < bytes) {
    std::string line;
    const auto words = 3 + rng.below(12);
    for (std::size_t w = 0; w < words; ++w) {
      if (w) line += rng.chance(0.1) ? ", " : " ";
      const auto n = 1 + rng.below(4);
      for (std::size_t s = 0; s < n; ++s) line += syllables[rng.below(syllables.size())];
      if (rng.chance(0.15)) {
        line += ' ';
        line += std::to_string(rng.below(100000));
      }
    }
    line += rng.chance(0.5) ? "." : "!\n";
    total += line.size();
    out.push_back(std::move(line));
  }
  return out;
}

std::size_t byte_count(const std::vector<std::string>& texts) {
  std::size_t n = 0;
  for (const auto& t : texts) n += t.size();
  return n;
}
}  // namespace

TEST_CASE("a trained tokenizer loads, reaches its size, round-trips seen and unseen text and compresses") {
  const auto seed = cqtest::test_seed(11, "bpe round trip");
  auto texts = ds::texts_of(ds::synthetic_sentences(tr::DataSplit::train, 3000, seed));
  const auto prose = random_prose(seed, 100'000);
  texts.insert(texts.end(), prose.begin(), prose.end());
  const auto trained = text::train_bpe(texts, {.vocab_size = 600});
  const auto tok = trained.tokenizer();
  CHECK(trained.stats.vocab_size == 600);
  CHECK(tok.model().vocab_size() + tok.added_tokens().size() == 600);
  CHECK(tok.num_token_id() == 600);
  CHECK(tok.size() == 601);
  REQUIRE(tok.token_to_id("<|endoftext|>").has_value());
  CHECK(*tok.token_to_id("<|endoftext|>") == 599);

  std::size_t ids = 0;
  for (const auto& t : texts) {
    const auto e = tok.encode(t);
    ids += e.size();
    REQUIRE(tok.decode(e) == t);
  }
  const std::size_t bytes = byte_count(texts);
  MESSAGE("corpus " << bytes << " bytes → " << ids << " ids");
  CHECK(ids < bytes / 2);  // merges at least halve the count of byte tokens

  const std::vector<std::string> unseen = {
      "Completely unseen words: zebra quixotic jumbo.", "汉字从未出现过：鬱龘靐。", "emoji 😀👍🏽 👨‍👩‍👧 🇯🇵",
      "tabs\tand\r\nnewlines  and   spaces", "ÅÄÖ åäö ﬁ Ω ≈ ∑", "<|endoftext|>between<|endoftext|>", "",
      "numbers 3.14 and -2e5 and 1,234,567"};
  for (const auto& t : unseen) CHECK(tok.decode(tok.encode(t)) == t);
  // Unseen characters fall back to their bytes: each of the 4 bytes of 😀 is a token or merged.
  CHECK(tok.encode("😀").size() >= 1);
  // With numbers: the text around <NUM> round-trips with the spans.
  const auto e = tok.encode_with_numbers("Convert: 3 weeks is 21 days. 你好 😀");
  CHECK(tok.decode_with_numbers(e.input_ids, e.numeric_values, {.spans = e.spans}) ==
        "Convert: 3 weeks is 21 days. 你好 😀");
}

TEST_CASE("numbers are cut out before counting, so digits do not spend the vocabulary") {
  std::vector<std::string> texts;
  for (int i = 0; i < 2000; ++i) texts.push_back("the value is " + std::to_string(100000 + i * 7) + " today");
  const auto without = text::train_bpe(texts, {.vocab_size = 300});
  const auto with = text::train_bpe(texts, {.vocab_size = 300, .remove_numbers = false});
  CHECK(without.stats.numbers_removed == 2000);
  CHECK(with.stats.numbers_removed == 0);
  const auto has_digit_token = [](const text::TrainedBpe& t) {
    const auto tok = t.tokenizer();
    for (text::TokenId id = 256; id <= tok.model().max_id(); ++id) {
      const auto b = tok.model().token_bytes(id);
      if (b.find_first_of("0123456789") != std::string_view::npos) return true;
    }
    return false;
  };
  // The Qwen2 regex makes every digit a piece of its own, so digits never merge either way;
  // cutting numbers out removes those pieces from the counts (6 digits per number here).
  CHECK_FALSE(has_digit_token(without));
  CHECK_FALSE(has_digit_token(with));
  CHECK(with.stats.pieces == without.stats.pieces + 2000 * 6);
  // Every text's words end up as few tokens: " value" is one token.
  const auto tok = without.tokenizer();
  CHECK(tok.model().token_id(" value").has_value());
}

TEST_CASE("training is deterministic: same corpus and options give a byte-identical file") {
  const auto seed = cqtest::test_seed(5, "bpe determinism");
  const auto texts = random_prose(seed, 200'000);
  const auto a = text::train_bpe(texts, {.vocab_size = 500}).text();
  const auto b = text::train_bpe(texts, {.vocab_size = 500}).text();
  CHECK(a == b);
  // Order of insertion of the same texts matters not (counts only).
  std::vector<std::string> reversed(texts.rbegin(), texts.rend());
  CHECK(text::train_bpe(reversed, {.vocab_size = 500}).text() == a);
  // A different vocabulary size gives a different file whose merges are a prefix.
  const auto small = nlohmann::json::parse(text::train_bpe(texts, {.vocab_size = 400}).text());
  const auto big = nlohmann::json::parse(a);
  REQUIRE(small["model"]["merges"].size() < big["model"]["merges"].size());
  for (std::size_t i = 0; i < small["model"]["merges"].size(); ++i)
    REQUIRE(small["model"]["merges"][i] == big["model"]["merges"][i]);
}

TEST_CASE("about 1 MB trains in a few seconds") {
  const auto seed = cqtest::test_seed(3, "bpe speed");
  auto texts = random_prose(seed, 600'000);
  const auto synthetic = ds::texts_of(ds::synthetic_sentences(tr::DataSplit::train, 12000, seed));
  texts.insert(texts.end(), synthetic.begin(), synthetic.end());
  const std::size_t bytes = byte_count(texts);
  CHECK(bytes > 1'000'000);
  const auto start = std::chrono::steady_clock::now();
  const auto trained = text::train_bpe(texts, {.vocab_size = 4096});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(bytes << " bytes, " << trained.stats.distinct_pieces << " distinct pieces, " << trained.stats.merges
                << " merges in " << seconds << " s");
  CHECK(trained.stats.merges > 1000);
  CHECK(seconds < 10.0);  // measured ≈ 0.5 s on 2 shared cores
}

TEST_CASE("stopping rules and option errors") {
  // min_frequency: a corpus with one repeated word stops once no pair repeats.
  const std::vector<std::string> texts(5, "abcabc");
  const auto t = text::train_bpe(texts, {.vocab_size = 1000, .min_frequency = 2});
  CHECK(t.stats.vocab_size < 1000);
  CHECK(t.tokenizer().encode("abcabc").size() == 1);
  CHECK(cqtest::error_message<DomainError>([] { text::BpeTrainer({.vocab_size = 200}); })
            .find("vocab_size must be ≥ 256 + 1 special tokens = 257, got 200") != std::string::npos);
  text::BpeTrainer trainer;
  CHECK(cqtest::error_message<DomainError>([&] { trainer.add_text("bad \xFF byte"); })
            .find("not valid UTF-8 (byte 4)") != std::string::npos);
  CHECK(cqtest::error_message<DomainError>([] { text::BpeTrainer({.special_tokens = {""}}); })
            .find("special_tokens[0]") != std::string::npos);
}
