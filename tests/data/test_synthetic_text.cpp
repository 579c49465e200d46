// The synthetic text generator: determinism, disjoint splits, numbers as the tokenizer reads
// them, stated predictability, the ideal model against the median baseline, predictable
// <NUM> positions.
#include "data_test_support.hpp"

#include <causalqwen/datasets/synthetic_text.hpp>
#include <causalqwen/datasets/synthetic_text_source.hpp>

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace cqdata;

TEST_CASE("the same seed gives the same sentences; another seed others") {
  const auto seed = cqtest::test_seed(21, "synthetic determinism");
  const auto a = ds::synthetic_sentences(tr::DataSplit::train, 500, seed);
  const auto b = ds::synthetic_sentences(tr::DataSplit::train, 500, seed);
  const auto c = ds::synthetic_sentences(tr::DataSplit::train, 500, seed + 1);
  CHECK(ds::texts_of(a) == ds::texts_of(b));
  CHECK(ds::texts_of(a) != ds::texts_of(c));
  // A longer list starts with the shorter one.
  const auto longer = ds::synthetic_sentences(tr::DataSplit::train, 800, seed);
  CHECK(std::equal(a.begin(), a.end(), longer.begin(), [](auto& x, auto& y) { return x.text == y.text; }));
}

TEST_CASE("no validation text appears in training, for both mixes") {
  const auto seed = cqtest::test_seed(22, "synthetic split");
  for (const auto& mix : {ds::SyntheticMix::demo(), ds::SyntheticMix::full()}) {
    ds::SyntheticTextOptions options{mix};
    const auto train = ds::synthetic_sentences(tr::DataSplit::train, 30000, seed, options);
    const auto val = ds::synthetic_sentences(tr::DataSplit::validation, 2000, seed, options);
    std::set<std::string> train_texts;
    for (const auto& s : train) train_texts.insert(s.text);
    std::set<std::string> val_texts;
    std::size_t shared = 0;
    for (const auto& s : val) {
      shared += train_texts.count(s.text);
      val_texts.insert(s.text);
      REQUIRE(options.split.side_of(s.text) == tr::DataSplit::validation);
    }
    CHECK(shared == 0);
    MESSAGE(train_texts.size() << " distinct training texts, " << val_texts.size() << " distinct held-out");
    CHECK(val_texts.size() > 300);  // the held-out set is not a handful of repeats
  }
}

TEST_CASE("every family, in both languages, writes numbers the tokenizer reads back exactly") {
  const auto seed = cqtest::test_seed(23, "synthetic numbers");
  const auto& tok = synthetic_tokenizer();
  for (std::size_t f = 0; f < ds::synthetic_family_count; ++f) {
    for (double zh : {0.0, 1.0}) {
      ds::SyntheticTextOptions options{ds::SyntheticMix::only(ds::SyntheticFamily(f), zh), {0.0, "all"}};
      const auto sentences = ds::synthetic_sentences(tr::DataSplit::train, 200, seed + f, options);
      CAPTURE(ds::family_name(ds::SyntheticFamily(f)));
      CAPTURE(zh);
      const auto held = ds::encode_held_out(tok, sentences);  // throws on any mismatch
      REQUIRE(held.size() == 200);
      for (const auto& h : held) {
        CAPTURE(h.sentence.text);
        REQUIRE(h.sentence.family == ds::SyntheticFamily(f));
        REQUIRE((h.sentence.language == ds::Language::zh) == (zh == 1.0));
        REQUIRE(!h.sentence.numbers.empty());
        REQUIRE(h.encoding.spans.front().token_index > 0);  // no sentence starts with a number
        for (std::size_t j = 0; j < h.sentence.numbers.size(); ++j) {
          const auto& n = h.sentence.numbers[j];
          REQUIRE(h.encoding.input_ids[h.encoding.spans[j].token_index] == tok.num_token_id());
          REQUIRE(h.encoding.numeric_values[h.encoding.spans[j].token_index] == n.value);
          REQUIRE(n.lo <= n.value);
          REQUIRE(n.value <= n.hi);
          if (n.predictability == ds::Predictability::exact) REQUIRE(n.ideal == n.value);
          else REQUIRE(n.lo < n.hi);
        }
        REQUIRE(tok.decode_with_numbers(h.encoding.input_ids, h.encoding.numeric_values,
                                        {.spans = h.encoding.spans}) == h.sentence.text);
      }
    }
  }
}

TEST_CASE("the stated predictability holds: exact numbers are functions of the text before them") {
  const auto seed = cqtest::test_seed(24, "synthetic predictability");
  ds::SyntheticTextOptions options{ds::SyntheticMix::full(), {0.0, "all"}};
  const auto sentences = ds::synthetic_sentences(tr::DataSplit::train, 20000, seed, options);
  // prefix (the text up to the number) → the values seen there.
  std::map<std::string, std::set<double>> by_prefix;
  std::map<ds::Predictability, std::size_t> counts;
  for (const auto& s : sentences) {
    const auto matches = causalqwen::text::find_numbers(s.text);
    REQUIRE(matches.size() == s.numbers.size());
    for (std::size_t j = 0; j < matches.size(); ++j) {
      ++counts[s.numbers[j].predictability];
      if (s.numbers[j].predictability == ds::Predictability::exact)
        by_prefix[s.text.substr(0, matches[j].begin)].insert(s.numbers[j].value);
    }
  }
  std::size_t ambiguous = 0;
  for (const auto& [prefix, values] : by_prefix) ambiguous += values.size() > 1;
  CHECK(ambiguous == 0);
  CHECK(counts[ds::Predictability::exact] > counts[ds::Predictability::bounded]);
  CHECK(counts[ds::Predictability::unpredictable] > 0);
}

TEST_CASE("the demo mix: an ideal model's held-out MAE is a small fraction of the median baseline's") {
  const auto seed = cqtest::test_seed(25, "synthetic ideal scores");
  const auto train = ds::synthetic_sentences(tr::DataSplit::train, 20000, seed);
  const auto val = ds::synthetic_sentences(tr::DataSplit::validation, 2000, seed);
  const auto s = ds::ideal_scores(train, val);
  MESSAGE("train median " << s.train_median << ", median baseline MAE " << s.median_baseline_mae
                          << ", ideal MAE " << s.ideal_mae << " (ratio " << s.ratio() << ") over " << s.numbers
                          << " numbers");
  CHECK(s.median_baseline_mae > 12.0);
  CHECK(s.ratio() < 0.09);  // the demo asks a trained model for ≤ 0.2
  // The full mix, with 10⁶–10⁹ values, is no place for a raw-value MAE: its ideal ratio is large.
  ds::SyntheticTextOptions full{ds::SyntheticMix::full()};
  const auto f = ds::ideal_scores(ds::synthetic_sentences(tr::DataSplit::train, 20000, seed, full),
                                  ds::synthetic_sentences(tr::DataSplit::validation, 2000, seed, full));
  CHECK(f.ratio() > 0.2);
}

TEST_CASE("<NUM> positions are predictable from the three tokens before them") {
  const auto seed = cqtest::test_seed(26, "synthetic NUM positions");
  const auto& tok = synthetic_tokenizer();
  const auto sentences = ds::synthetic_sentences(tr::DataSplit::train, 5000, seed);
  const auto corpus = ds::synthetic_corpus(tok, sentences);
  // context (3 previous ids, or fewer at a sentence start) → (times followed by <NUM>, times seen)
  std::map<std::vector<text::TokenId>, std::pair<std::size_t, std::size_t>> contexts;
  std::set<std::vector<text::TokenId>> num_contexts;
  for (std::size_t k = 0; k < corpus->size(); ++k) {
    const auto ids = corpus->ids_of(k);
    for (std::size_t i = 1; i < ids.size(); ++i) {
      std::vector<text::TokenId> ctx(ids.begin() + (i >= 3 ? i - 3 : 0), ids.begin() + i);
      auto& c = contexts[ctx];
      ++c.second;
      if (ids[i] == tok.num_token_id()) {
        ++c.first;
        num_contexts.insert(ctx);
      }
    }
  }
  std::size_t num_after = 0, seen = 0;
  for (const auto& ctx : num_contexts) {
    num_after += contexts[ctx].first;
    seen += contexts[ctx].second;
  }
  const double share = double(num_after) / double(seen);
  MESSAGE("in contexts that precede a <NUM>, <NUM> follows " << share * 100 << "% of the time");
  CHECK(share > 0.99);
}

TEST_CASE("option errors") {
  ds::SyntheticMix none;
  tr::SplitMix64 rng(1);
  CHECK(cqtest::error_message<causalqwen::DomainError>([&] { ds::draw_synthetic_sentence(rng, none); })
            .find("every family weight is 0") != std::string::npos);
  ds::SyntheticTextOptions no_val{ds::SyntheticMix::demo(), {0.0, "x"}};
  CHECK(cqtest::error_message<causalqwen::DomainError>(
            [&] { ds::synthetic_sentences(tr::DataSplit::validation, 1, 1, no_val); })
            .find("found only 0 of 1 val sentences") != std::string::npos);
}
