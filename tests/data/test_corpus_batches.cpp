// The tokenized corpus and its batch source: label/target alignment, padding and masks,
// coverage of an epoch, determinism, exact state()/restore(), evaluation batches.
#include "data_test_support.hpp"

#include <causalqwen/train/corpus_batch_source.hpp>
#include <causalqwen/datasets/synthetic_text_source.hpp>

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <vector>

using namespace cqdata;
using causalqwen::FormatError;
using Batch = causalqwen::train::BatchData<float>;

namespace {

std::shared_ptr<const tr::TokenCorpus> small_corpus(std::uint64_t seed, std::size_t count = 300) {
  return ds::synthetic_corpus(synthetic_tokenizer(), ds::synthetic_sentences(tr::DataSplit::train, count, seed));
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.batch == b.batch && a.seq == b.seq && a.input_ids == b.input_ids && a.labels == b.labels &&
         a.attention_mask == b.attention_mask && a.position_ids == b.position_ids &&
         a.numeric_values == b.numeric_values && a.target_values == b.target_values;
}

/// Checks the invariants every batch must hold (see corpus_batch_source.hpp).
void check_alignment(const Batch& b, text::TokenId num_id, bool packed) {
  const std::size_t S = b.seq;
  for (std::size_t r = 0; r < b.batch; ++r)
    for (std::size_t i = 0; i < S; ++i) {
      const std::size_t at = r * S + i;
      REQUIRE(b.position_ids[at] == std::int64_t(i));
      if (b.input_ids[at] != num_id) REQUIRE(b.numeric_values[at] == 0.0f);
      if (b.labels[at] == -100) {
        REQUIRE(b.target_values[at] == 0.0f);
      } else {
        REQUIRE(b.attention_mask[at] == 1);
        if (b.labels[at] != num_id) REQUIRE(b.target_values[at] == 0.0f);
        if (i + 1 < S && b.attention_mask[at + 1] == 1) {  // label i is input i+1, with its value
          REQUIRE(b.labels[at] == b.input_ids[at + 1]);
          REQUIRE(b.target_values[at] == b.numeric_values[at + 1]);
        }
      }
      if (b.attention_mask[at] == 0) REQUIRE(b.labels[at] == -100);
      if (packed) REQUIRE(b.attention_mask[at] == 1);
    }
  if (packed)
    for (std::size_t r = 0; r < b.batch; ++r)
      for (std::size_t i = 0; i < S; ++i) REQUIRE(b.labels[r * S + i] != -100);
}

}  // namespace

TEST_CASE("the corpus's numbers are the values at its <NUM> ids, in order") {
  tr::TokenCorpus c;
  c.num_id = 9;
  const std::vector<text::TokenId> a_ids{1, 9, 2, 9}, b_ids{9, 3};
  const std::vector<double> a_values{0, 1.5, 0, -2}, b_values{1e30, 0};
  c.add(a_ids, a_values);
  c.add(b_ids, b_values);
  CHECK(c.numbers() == std::vector<double>{1.5, -2, 1e30});
  CHECK(tr::TokenCorpus{}.numbers().empty());
}

TEST_CASE("packed batches: labels are the next tokens, targets their values, each token predicted once per epoch") {
  const auto seed = cqtest::test_seed(31, "packed batches");
  const auto corpus = small_corpus(seed);
  const std::size_t B = 4, S = 16;
  tr::CorpusBatchSource<float> source(corpus, {.batch_size = B, .seq_len = S, .layout = tr::BatchLayout::packed, .seed = seed});
  // Rebuild the epoch-0 stream from the batches: inputs of consecutive windows concatenate.
  std::vector<text::TokenId> stream;
  std::vector<float> values;
  std::size_t num_labels = 0;
  while (stream.size() < corpus->token_count()) {
    const auto b = source.next();
    check_alignment(b, corpus->num_id, true);
    for (std::size_t r = 0; r < B; ++r) {
      for (std::size_t i = 0; i < S; ++i) {
        stream.push_back(b.input_ids[r * S + i]);
        values.push_back(b.numeric_values[r * S + i]);
        if (b.labels[r * S + i] == corpus->num_id) ++num_labels;
      }
      // The last label of a window is the next window's first input.
      if (r + 1 < B) REQUIRE(b.labels[r * S + S - 1] == b.input_ids[(r + 1) * S]);
    }
  }
  stream.resize(corpus->token_count());
  // Epoch 0's stream is a permutation of the sequences: the same multiset of (id) per sequence.
  std::map<text::TokenId, long> histogram;
  for (auto id : stream) ++histogram[id];
  for (auto id : corpus->ids) --histogram[id];
  for (const auto& [id, n] : histogram) REQUIRE(n == 0);
  // And shuffled: not the corpus order.
  CHECK(stream != corpus->ids);
  CHECK(num_labels > 0);
}

TEST_CASE("padded batches: one sequence per row, −100 and mask 0 on padding, values at <NUM> labels") {
  const auto seed = cqtest::test_seed(32, "padded batches");
  const auto& tok = synthetic_tokenizer();
  const auto sentences = ds::synthetic_sentences(tr::DataSplit::train, 50, seed);
  const auto corpus = ds::synthetic_corpus(tok, sentences);
  const std::size_t S = 24;
  tr::CorpusBatchSource<double> source(corpus, {.batch_size = 5, .seq_len = S, .layout = tr::BatchLayout::padded,
                                                .seed = seed, .shuffle = false});
  for (std::size_t k = 0; k < 10; ++k) {
    const auto b = source.next();
    for (std::size_t r = 0; r < 5; ++r) {
      const std::size_t s = k * 5 + r;
      const auto ids = corpus->ids_of(s);
      const std::size_t n = std::min(ids.size(), S);
      for (std::size_t i = 0; i < S; ++i) {
        const std::size_t at = r * S + i;
        CAPTURE(sentences[s].text);
        REQUIRE(b.attention_mask[at] == (i < n ? 1 : 0));
        REQUIRE(b.input_ids[at] == (i < n ? ids[i] : corpus->pad_id));
        REQUIRE(b.labels[at] == (i + 1 < ids.size() && i < n ? ids[i + 1] : -100));
      }
      // The numbers, in order, are the targets at the <NUM> labels.
      std::vector<double> targets;
      for (std::size_t i = 0; i < S; ++i)
        if (b.labels[r * S + i] == corpus->num_id) targets.push_back(b.target_values[r * S + i]);
      std::vector<double> expected;
      for (const auto& num : sentences[s].numbers) expected.push_back(num.value);
      expected.resize(targets.size());  // a cut sequence keeps its first numbers
      REQUIRE(targets == expected);
      REQUIRE(corpus->ids_of(s).back() == corpus->pad_id);  // every sequence ends in <|endoftext|>
    }
  }
}

TEST_CASE("same seed, same batches; state()/restore() continues exactly, across epochs") {
  const auto seed = cqtest::test_seed(33, "batch state");
  const auto corpus = small_corpus(seed, 40);
  for (auto layout : {tr::BatchLayout::packed, tr::BatchLayout::padded}) {
    CAPTURE(tr::layout_name(layout));
    const tr::CorpusBatchOptions options{.batch_size = 3, .seq_len = 20, .layout = layout, .seed = seed};
    tr::CorpusBatchSource<float> a(corpus, options), b(corpus, options);
    for (int i = 0; i < 7; ++i) REQUIRE(same_batch(a.next(), b.next()));
    const auto saved = a.state();
    std::vector<Batch> expected;
    for (int i = 0; i < 60; ++i) expected.push_back(a.next());  // several epochs
    CHECK(a.epoch() > 1);
    tr::CorpusBatchSource<float> fresh(corpus, options);
    fresh.restore(nlohmann::json::parse(saved.dump()));  // through text, as in a checkpoint
    for (const auto& e : expected) REQUIRE(same_batch(fresh.next(), e));
    CHECK(fresh.state() == a.state());
    // Another seed gives other batches.
    tr::CorpusBatchOptions other = options;
    other.seed = seed + 1;
    tr::CorpusBatchSource<float> c(corpus, other), d(corpus, options);
    bool differ = false;
    for (int i = 0; i < 20; ++i) differ |= !same_batch(c.next(), d.next());
    CHECK(differ);
  }
}

TEST_CASE("restore refuses a state of other data or settings, naming the field") {
  const auto corpus = small_corpus(1, 20);
  tr::CorpusBatchSource<float> a(corpus, {.batch_size = 2, .seq_len = 8});
  a.next();
  const auto s = a.state();
  tr::CorpusBatchSource<float> other_len(corpus, {.batch_size = 2, .seq_len = 9});
  CHECK(cqtest::error_message<FormatError>([&] { other_len.restore(s); }).find("field 'seq_len' is 8") != std::string::npos);
  tr::CorpusBatchSource<float> other_data(small_corpus(2, 20), {.batch_size = 2, .seq_len = 8});
  CHECK(cqtest::error_message<FormatError>([&] { other_data.restore(s); }).find("field 'fingerprint'") != std::string::npos);
  auto bad = s;
  bad["index"] = 20;
  CHECK(cqtest::error_message<FormatError>([&] { a.restore(bad); }).find("index 20 ≥ 20 sequences") != std::string::npos);
  CHECK(cqtest::error_message<FormatError>([&] { a.restore(nlohmann::json{{"source", "features"}}); })
            .find("not a corpus source state") != std::string::npos);
}

TEST_CASE("evaluation batches cover every sequence once, in order") {
  const auto corpus = small_corpus(4, 23);
  const auto padded = tr::evaluation_batches<float>(*corpus, 5, 64, tr::BatchLayout::padded);
  REQUIRE(padded.size() == 5);
  CHECK(padded.back().batch == 3);
  for (std::size_t k = 0; k < 23; ++k) {
    const auto& b = padded[k / 5];
    const auto ids = corpus->ids_of(k);
    for (std::size_t i = 0; i < ids.size(); ++i) REQUIRE(b.input_ids[(k % 5) * 64 + i] == ids[i]);
    check_alignment(b, corpus->num_id, false);
  }
  const auto packed = tr::evaluation_batches<float>(*corpus, 4, 16, tr::BatchLayout::packed);
  std::vector<text::TokenId> stream;
  std::size_t labelled = 0;
  for (const auto& b : packed) {
    check_alignment(b, corpus->num_id, false);
    for (std::size_t i = 0; i < b.batch * b.seq; ++i) {
      if (b.attention_mask[i]) stream.push_back(b.input_ids[i]);
      labelled += b.labels[i] != -100;
    }
  }
  CHECK(stream == corpus->ids);
  CHECK(labelled == corpus->token_count() - 1);
}

TEST_CASE("a batch whose size overflows or passes the memory is refused before anything is allocated") {
  const auto corpus = small_corpus(5, 20);
  const auto m = cqtest::error_message<causalqwen::SizeError>(
      [&] { tr::CorpusBatchSource<float>(corpus, {.batch_size = 288230376151711745ull, .seq_len = 64}); });
  CHECK(m.find("a [B,S] = [288230376151711745,64] batch: the size 288230376151711745 x 64 does not fit in 64 bits") !=
        std::string::npos);
  CHECK(cqtest::error_message<causalqwen::SizeError>(
            [&] { tr::CorpusBatchSource<float>(corpus, {.batch_size = 1 << 20, .seq_len = 1 << 24}); })
            .find("a [B,S] = [1048576,16777216] batch needs ") != std::string::npos);
  CHECK_THROWS_AS(tr::evaluation_batches<float>(*corpus, 1, std::size_t{1} << 62), causalqwen::SizeError);
  CHECK_THROWS_AS(tr::evaluation_batches<float>(*corpus, 1, std::size_t{1} << 62, tr::BatchLayout::packed),
                  causalqwen::SizeError);
}
