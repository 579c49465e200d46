/// Teacher-forced evaluation of a model on batches: one forward pass per batch (deterministic
/// action, no gradients), the batches' loss parts and metrics averaged, and every <NUM> target
/// scored on its own:
///   numbers      = #{<NUM> targets}                          (labels = <NUM>; the label at
///                                                               position s is token s+1)
///   num_correct  = #{<NUM> targets with argmax_k P_k = <NUM>}
///   abs_error    = Σ |loc_Y − y| over the <NUM> targets, in batch, row, position order
///   num_accuracy = num_correct / numbers,  mae = abs_error / numbers  (0 without targets)
/// An optional callback sees each <NUM> target's prediction (loc_Y, scale_Y, P(<NUM>)), in
/// that order, so a caller can group errors (by template family, by sentence) without a
/// second pass.
#pragma once
#include "causalqwen/io/batch_json.hpp"
#include "causalqwen/model/causal_qwen.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/train/metrics_mean.hpp"

#include <cmath>
#include <cstddef>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

namespace causalqwen::train {

/// One <NUM> target of an evaluation and the head's prediction there.
struct NumberPrediction {
  std::size_t batch = 0;       // index of the batch in the evaluation
  std::size_t row = 0;         // b, the sequence in that batch
  std::size_t position = 0;    // s: the prediction made at s for token s+1
  double target = 0;           // y = target_values[b,s]
  double loc = 0, scale = 0;   // loc_Y, scale_Y: the Cauchy prediction of y
  double p_num = 0;            // P(<NUM>) at [b,s]
  bool predicted_num = false;  // argmax_k P_k = <NUM>
};

/// What evaluate() returns (see the file comment for the formulas).
struct Evaluation {
  model::HeadMetrics metrics;       // the batches' HeadMetrics, equal-weight mean (MetricsMean)
  std::size_t batches = 0;
  std::size_t numbers = 0, num_correct = 0;
  double abs_error = 0;             // Σ |loc_Y − y| over the <NUM> targets

  double num_accuracy() const { return numbers ? static_cast<double>(num_correct) / static_cast<double>(numbers) : 0.0; }
  double mae() const { return numbers ? abs_error / static_cast<double>(numbers) : 0.0; }
};

/// Called once per <NUM> target, in batch, row, position order.
using NumberCallback = std::function<void(const NumberPrediction&)>;

namespace detail_evaluate {

/// Adds one batch (index `k` of the evaluation) to `e`.
template <class T>
void add_batch(model::CausalQwen<T>& model, const io::BatchData<T>& b, std::size_t k, Evaluation& e,
               MetricsMean& mean, const NumberCallback& on_number) {
  typename model::CausalQwen<T>::Cache cache;
  mean.add(model.evaluate(b.view(), cache));
  ++e.batches;
  const auto& h = cache.head;
  const auto num = model.config().num_token_id;
  for (std::size_t r = 0; r < b.batch; ++r)
    for (std::size_t s = 0; s < b.seq; ++s) {
      const std::size_t m = r * b.seq + s;
      if (!h.num[m]) continue;
      const bool predicted_num = h.ovr.pred[m] == num;
      const double y = static_cast<double>(b.target_values[m]);
      ++e.numbers;
      e.num_correct += predicted_num;
      e.abs_error += std::fabs(static_cast<double>(h.regression.loc_Y[m]) - y);
      if (on_number)
        on_number({k, r, s, y, static_cast<double>(h.regression.loc_Y[m]), static_cast<double>(h.regression.scale_Y[m]),
                   static_cast<double>(h.regression.P_num[m]), predicted_num});
    }
}

}  // namespace detail_evaluate

/// Evaluates `model` on every batch of `batches`, in order (see the file comment).
template <class T>
Evaluation evaluate(model::CausalQwen<T>& model, std::type_identity_t<std::span<const io::BatchData<T>>> batches,
                    const NumberCallback& on_number = {}) {
  Evaluation e;
  MetricsMean mean;
  for (std::size_t k = 0; k < batches.size(); ++k)
    detail_evaluate::add_batch(model, batches[k], k, e, mean, on_number);
  e.metrics = mean.mean();
  return e;
}

/// Evaluates `model` on the next `count` batches of `source` (see the file comment); the source
/// moves on by `count` batches.
template <class T>
Evaluation evaluate(model::CausalQwen<T>& model, TokenBatchSource<T>& source, std::size_t count,
                    const NumberCallback& on_number = {}) {
  Evaluation e;
  MetricsMean mean;
  for (std::size_t k = 0; k < count; ++k) detail_evaluate::add_batch(model, source.next(), k, e, mean, on_number);
  e.metrics = mean.mean();
  return e;
}

}  // namespace causalqwen::train
