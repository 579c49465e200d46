// train/evaluate.hpp: teacher-forced evaluation of a model on batches — its totals agree with
// the per-batch HeadMetrics, the callback sees every <NUM> target in order, the source and the
// list overloads agree, and on held-out synthetic sentences it scores exactly what matching
// each number's span to its prediction (the demo's former held-out scoring) scores.
#include <causalqwen/text/bpe_trainer.hpp>
#include <causalqwen/train/batch_list_source.hpp>
#include <causalqwen/train/evaluate.hpp>
#include <causalqwen/datasets/synthetic_text_source.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "tiny_sources.hpp"

#include <cmath>
#include <tuple>
#include <vector>

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace ds = causalqwen::datasets;

namespace {

}  // namespace

TEST_CASE_TEMPLATE("evaluate: totals, the per-target callback and both overloads", T, float, double) {
  const auto seed = cqtest::test_seed(11, "evaluate totals");
  cq::model::CausalQwen<T> model(cqtest::tiny_config());
  model.init_random(seed);
  cqtest::CountingTokenSource<T> counting(3, 9, 11, 11);
  std::vector<cq::train::BatchData<T>> batches;
  for (int k = 0; k < 3; ++k) batches.push_back(counting.next());

  std::vector<ct::NumberPrediction> seen;
  const auto e = ct::evaluate(model, batches, [&](const ct::NumberPrediction& p) { seen.push_back(p); });
  CHECK(e.batches == 3);
  // the same totals from each batch's own metrics: counts, <NUM> accuracy and MAE per batch
  std::size_t numbers = 0;
  double correct = 0, abs_error = 0, loss = 0;
  for (const auto& b : batches) {
    typename cq::model::CausalQwen<T>::Cache cache;
    const auto m = model.evaluate(b.view(), cache);
    numbers += m.num_count;
    correct += m.num_accuracy * static_cast<double>(m.num_count);
    abs_error += m.reg_mae * static_cast<double>(m.num_count);
    loss += m.L_total / 3.0;
  }
  REQUIRE(numbers > 0);
  CHECK(e.numbers == numbers);
  CHECK(static_cast<double>(e.num_correct) == doctest::Approx(correct));
  CHECK(e.mae() == doctest::Approx(abs_error / static_cast<double>(numbers)).epsilon(1e-5));
  CHECK(e.num_accuracy() == doctest::Approx(correct / static_cast<double>(numbers)));
  CHECK(e.metrics.L_total == doctest::Approx(loss));
  CHECK(e.metrics.num_count == numbers);
  // the callback: every <NUM> target once, in batch, row, position order, with the batch's target
  REQUIRE(seen.size() == numbers);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const auto& p = seen[i];
    const auto& b = batches[p.batch];
    const std::size_t m = p.row * b.seq + p.position;
    CHECK(b.labels[m] == 11);
    CHECK(p.target == static_cast<double>(b.target_values[m]));
    CHECK(p.scale > 0);
    if (i > 0) {
      const auto& q = seen[i - 1];
      CHECK(std::tuple(q.batch, q.row, q.position) < std::tuple(p.batch, p.row, p.position));
    }
  }
  // a batch source gives the same evaluation, bit for bit
  ct::BatchListSource<T> list(batches);
  const auto from_source = ct::evaluate(model, list, 3);
  CHECK(from_source.numbers == e.numbers);
  CHECK(from_source.num_correct == e.num_correct);
  CHECK(from_source.abs_error == e.abs_error);
  CHECK(from_source.metrics.L_total == e.metrics.L_total);
  CHECK(list.state() == nlohmann::json{{"index", 3}});
}

TEST_CASE("evaluate scores held-out sentences exactly as matching each number's span does") {
  const auto seed = cqtest::test_seed(20261121, "evaluate held-out");
  const auto train = ds::synthetic_sentences(ct::DataSplit::train, 600, seed);
  const auto val = ds::synthetic_sentences(ct::DataSplit::validation, 40, seed);
  const auto tok = cq::text::train_bpe(ds::texts_of(train), {.vocab_size = 300}).tokenizer();
  cq::model::CausalConfig cfg;
  cfg.num_token_id = tok.num_token_id();
  cfg.num_classes = static_cast<std::size_t>(cfg.num_token_id) + 1;
  cfg.backbone = {(cfg.num_classes + 63) / 64 * 64, 16, 32, 1, 2, 1, 1e-6, 1e4};
  cfg.causal_size = 16;
  cq::model::CausalQwen<float> model(cfg);
  model.init_random(seed, 0.02);
  constexpr std::size_t B = 16, S = 64;
  const auto batches = ds::synthetic_validation_batches<float>(tok, val, B, S);
  const auto held = ds::encode_held_out(tok, val);

  // the reference: each sentence's spans, predicted at the position before their <NUM>
  std::size_t numbers = 0, correct = 0, sentence = 0;
  double abs_error = 0;
  std::vector<std::vector<double>> values(val.size());
  for (const auto& b : batches) {
    typename cq::model::CausalQwen<float>::Cache cache;
    model.evaluate(b.view(), cache);
    const auto& h = cache.head;
    for (std::size_t r = 0; r < b.batch && sentence < val.size(); ++r, ++sentence) {
      CHECK(held[sentence].encoding.input_ids.size() <= S);  // every sentence fits its row
      for (const auto& span : held[sentence].encoding.spans) {
        const std::size_t t = span.token_index;
        if (t == 0 || t >= b.seq) continue;
        const std::size_t m = r * b.seq + t - 1;
        ++numbers;
        correct += h.ovr.pred[m] == cfg.num_token_id;
        abs_error += std::fabs(static_cast<double>(h.regression.loc_Y[m]) - span.value);
        values[sentence].push_back(h.regression.loc_Y[m]);
      }
    }
  }
  std::vector<std::vector<double>> seen(val.size());
  const auto e = ct::evaluate(model, batches, [&](const ct::NumberPrediction& p) {
    seen[p.batch * B + p.row].push_back(p.loc);
  });
  REQUIRE(numbers > 0);
  CHECK(e.numbers == numbers);
  CHECK(e.num_correct == correct);
  CHECK(e.abs_error == abs_error);  // the same terms summed in the same order
  CHECK(seen == values);
}
