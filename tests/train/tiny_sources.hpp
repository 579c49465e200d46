// Tiny batch sources for the trainer tests (the real data sets live in train/ beside the trainer),
// and the tiny model they feed.
//   tiny_config: H 12, F 16, 1 layer, 2 heads, 1 KV head, C 8, 12 classes, <NUM> = 11
//   CountingTokenSource: [B,S] sequences "a b <NUM> c" whose number is 2× the previous one,
//                        from a counter (state = the counter)
//   LinearFeatureSource: z ~ N(0,1)^H from a seeded stream; label = <NUM> when z₀ > 0, else
//                        1 + (index mod 3); value = 3·z₁ + 1 at <NUM> (state = the batch index)
#pragma once
#include <causalqwen/model/config.hpp>
#include <causalqwen/train/batch_source.hpp>

#include <random>

namespace cqtest {

/// The tiny model of the trainer tests, with OvR threshold `threshold`.
inline causalqwen::model::CausalConfig tiny_config(double threshold = 1.0) {
  causalqwen::model::CausalConfig c;
  c.backbone = {12, 8, 16, 1, 2, 1, 1e-6, 1e6};
  c.causal_size = 8;
  c.num_classes = 12;
  c.num_token_id = 11;
  c.ovr_threshold = {threshold};
  return c;
}

template <class T>
class CountingTokenSource final : public causalqwen::train::TokenBatchSource<T> {
 public:
  CountingTokenSource(std::size_t batch, std::size_t seq, std::int64_t num_id, std::int64_t vocab, std::uint64_t offset = 0)
      : B_(batch), S_(seq), num_(num_id), vocab_(vocab), counter_(offset) {}
  causalqwen::train::BatchData<T> next() override {
    causalqwen::train::BatchData<T> d;
    d.batch = B_, d.seq = S_;
    d.input_ids.resize(B_ * S_), d.labels.resize(B_ * S_), d.attention_mask.assign(B_ * S_, 1);
    d.numeric_values.assign(B_ * S_, T(0)), d.target_values.assign(B_ * S_, T(0));
    for (std::size_t b = 0; b < B_; ++b) {
      const std::uint64_t k = counter_++;
      double value = 1.0 + static_cast<double>(k % 7);
      for (std::size_t s = 0; s < S_; ++s) {
        const std::size_t i = b * S_ + s;
        const bool is_num = s % 3 == 2;
        d.input_ids[i] = is_num ? num_ : static_cast<std::int64_t>(1 + (k + s) % (vocab_ - 2));
        if (is_num) {
          d.numeric_values[i] = static_cast<T>(value);
          value *= 2;
        }
      }
      for (std::size_t s = 0; s < S_; ++s) {  // next-token labels, values beside <NUM> labels
        const std::size_t i = b * S_ + s;
        if (s + 1 == S_) {
          d.labels[i] = -100;
          continue;
        }
        d.labels[i] = d.input_ids[i + 1];
        if (d.labels[i] == num_) d.target_values[i] = d.numeric_values[i + 1];
      }
    }
    return d;
  }
  nlohmann::json state() const override { return {{"counter", counter_}}; }
  void restore(const nlohmann::json& s) override { counter_ = s.at("counter").get<std::uint64_t>(); }

 private:
  std::size_t B_, S_;
  std::int64_t num_, vocab_;
  std::uint64_t counter_;
};

template <class T>
class LinearFeatureSource final : public causalqwen::train::FeatureBatchSource<T> {
 public:
  LinearFeatureSource(std::size_t rows, std::size_t hidden, std::int64_t num_id, std::uint64_t seed)
      : rows_(rows), hidden_(hidden), num_(num_id), seed_(seed) {}
  causalqwen::train::FeatureBatch<T> next() override {
    std::mt19937_64 rng(seed_ * 1000003 + index_);
    std::normal_distribution<double> normal;
    causalqwen::train::FeatureBatch<T> b;
    b.rows = rows_, b.hidden = hidden_;
    b.features.resize(rows_ * hidden_), b.labels.resize(rows_), b.target_values.assign(rows_, T(0));
    for (std::size_t m = 0; m < rows_; ++m) {
      for (std::size_t h = 0; h < hidden_; ++h) b.features[m * hidden_ + h] = static_cast<T>(normal(rng));
      const double z0 = b.features[m * hidden_], z1 = b.features[m * hidden_ + 1];
      if (z0 > 0) {
        b.labels[m] = num_;
        b.target_values[m] = static_cast<T>(3.0 * z1 + 1.0);
      } else {
        b.labels[m] = static_cast<std::int64_t>(1 + m % 3);
      }
    }
    ++index_;
    return b;
  }
  nlohmann::json state() const override { return {{"index", index_}}; }
  void restore(const nlohmann::json& s) override { index_ = s.at("index").get<std::uint64_t>(); }

 private:
  std::size_t rows_, hidden_;
  std::int64_t num_;
  std::uint64_t seed_, index_ = 0;
};

}  // namespace cqtest
