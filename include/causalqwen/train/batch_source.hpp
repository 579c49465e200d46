/// Where training batches come from. The trainer asks a source for batches one after another;
/// a source's `state()` is all it needs to continue exactly where it was (saved in checkpoints,
/// so that a resumed run sees the same batches as an uninterrupted one).
///
///   TokenBatchSource<T>    batches of token ids with numbers (text corpora, synthetic text)
///   FeatureBatchSource<T>  batches of feature vectors standing in for the backbone's z
///                          (the synthetic-features mode: heads studied alone)
#pragma once
#include "causalqwen/train/batch_json.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace causalqwen::train {

/// A stream of [B,S] token batches: input_ids, numeric_values, attention_mask, next-token
/// labels (−100 on padding) and target_values aligned with the labels.
template <class T>
class TokenBatchSource {
 public:
  virtual ~TokenBatchSource() = default;
  /// The next batch (sources cycle over their data, epoch after epoch).
  virtual BatchData<T> next() = 0;
  /// Everything needed to continue from here: position, epoch, RNG state (JSON, exact).
  virtual nlohmann::json state() const = 0;
  /// Continues from a state returned by state() (FormatError if it does not fit this source).
  virtual void restore(const nlohmann::json& state) = 0;
};

/// One batch of the synthetic-features mode: M rows of (feature z [H], target token, target value).
template <class T>
struct FeatureBatch {
  std::size_t rows = 0, hidden = 0;
  std::vector<T> features;             // [M,H], stands in for the backbone's output z
  std::vector<std::int64_t> labels;    // [M], a class id or −100
  std::vector<T> target_values;        // [M], the number where labels == <NUM>, else 0
};

template <class T>
class FeatureBatchSource {
 public:
  virtual ~FeatureBatchSource() = default;
  virtual FeatureBatch<T> next() = 0;
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
};

}  // namespace causalqwen::train
