/// A TokenBatchSource over a fixed list of batches, served in order and then again from the
/// first (batch i of the stream is batches[i mod n]). Validation sets use it: the list from
/// evaluation_batches() or JsonlDataset::validation_batches(), replayed from the start by each
/// evaluation. Its state is the index of the next batch.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/train/batch_source.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace causalqwen::train {

template <class T>
class BatchListSource final : public TokenBatchSource<T> {
 public:
  /// Serves `batches` (at least one; DomainError when empty).
  explicit BatchListSource(std::vector<BatchData<T>> batches) : batches_(std::move(batches)) {
    detail::require(!batches_.empty(), "train::BatchListSource", "the list of batches is empty");
  }

  /// batches[index mod n]; then index ← index + 1.
  BatchData<T> next() override { return batches_[index_++ % batches_.size()]; }
  /// {"index": the number of batches served so far}.
  nlohmann::json state() const override { return {{"index", index_}}; }
  /// Continues from a state() (FormatError without an unsigned "index").
  void restore(const nlohmann::json& state) override {
    if (!state.is_object() || !state.contains("index") || !state["index"].is_number_unsigned())
      throw FormatError("causalqwen::train::BatchListSource: the state must be {\"index\": n} with n >= 0");
    index_ = state["index"].get<std::size_t>();
  }

  /// The number of batches in the list.
  std::size_t size() const { return batches_.size(); }
  /// The list itself, in serving order from index 0.
  const std::vector<BatchData<T>>& batches() const { return batches_; }

 private:
  std::vector<BatchData<T>> batches_;
  std::size_t index_ = 0;
};

}  // namespace causalqwen::train
