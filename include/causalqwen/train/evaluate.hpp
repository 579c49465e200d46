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
///
/// The same pass fills `calibration` (eval/calibration.hpp): the <NUM> targets' errors, NLL,
/// interval coverage and PIT histogram from (loc_Y, scale_Y, y) read as the model's reg_head says, and at every position with a
/// label the next-token accuracy, <NUM> precision/recall/F1, Σ_k P_k and the reliability of
/// max_k P_k, overall and, with EvaluationOptions::group_of, per group of sequences.
#pragma once
#include "causalqwen/train/batch_json.hpp"
#include "causalqwen/model/causal_qwen.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/eval/calibration.hpp"
#include "causalqwen/train/metrics_mean.hpp"

#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
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

/// Where a sequence sits in an evaluation: batch index, row in that batch, and its index among
/// all the sequences of the evaluation (rows counted over the batches in order).
struct SequenceIndex {
  std::size_t batch = 0, row = 0, sequence = 0;
};

/// The group (a name) of a sequence.
using GroupOfSequence = std::function<std::string(const SequenceIndex&)>;

/// The group of sequence i is groups[i] (the sequence index of SequenceIndex); DomainError
/// for a sequence beyond the list.
inline GroupOfSequence group_by_sequence(std::vector<std::string> groups) {
  return [groups = std::move(groups)](const SequenceIndex& at) {
    detail::require(at.sequence < groups.size(), "group_by_sequence", "sequence {} has no group: only {} groups given",
                    at.sequence, groups.size());
    return groups[at.sequence];
  };
}

/// How evaluate() computes its calibration statistics, and whom it tells of its progress.
struct EvaluationOptions {
  std::optional<double> baseline_value;  // a constant prediction of every target (e.g. the median
                                         // of the training targets); none: no baseline comparison
  GroupOfSequence group_of;              // empty: overall statistics only; else called once for each
                                         // sequence with at least one label, in order
  std::function<void(std::size_t done, std::size_t total)> on_batch;  // after each batch (1-based done)
};

/// What evaluate() returns (see the file comment for the formulas).
struct Evaluation {
  model::HeadMetrics metrics;       // the batches' HeadMetrics, equal-weight mean (MetricsMean)
  std::size_t batches = 0;
  std::size_t numbers = 0, num_correct = 0;
  double abs_error = 0;             // Σ |loc_Y − y| over the <NUM> targets
  eval::CalibrationReport calibration;    // overall and per group (eval/calibration.hpp)
  std::size_t non_finite = 0;       // positions left out of `calibration`: a prediction that is
                                    // not finite (a diverged model), counted instead of thrown

  double num_accuracy() const { return numbers ? static_cast<double>(num_correct) / static_cast<double>(numbers) : 0.0; }
  double mae() const { return numbers ? abs_error / static_cast<double>(numbers) : 0.0; }
};

/// Called once per <NUM> target, in batch, row, position order.
using NumberCallback = std::function<void(const NumberPrediction&)>;

namespace detail_evaluate {

/// The running state of one evaluation besides its Evaluation.
struct Progress {
  MetricsMean mean;
  eval::GroupedCalibration calibration;
  std::size_t sequences = 0;  // rows of the batches seen so far
};

/// Adds one batch (index `k` of the evaluation) to `e`: totals and callback, then the
/// calibration tallies of each row (overall, and the row's group when `options.group_of` is set).
/// `cache` is kept across the batches, so its buffers are allocated once.
template <class T>
void add_batch(model::CausalQwen<T>& model, const BatchData<T>& b, std::size_t k, Evaluation& e, Progress& progress,
               typename model::CausalQwen<T>::Cache& cache, const NumberCallback& on_number,
               const EvaluationOptions& options) {
  progress.mean.add(model.evaluate(b.view(), cache));
  ++e.batches;
  const auto& h = cache.head;
  const auto num = model.config().num_token_id;
  for (std::size_t r = 0; r < b.batch; ++r, ++progress.sequences) {
    eval::CalibrationTally* group = nullptr;
    for (std::size_t s = 0; s < b.seq; ++s) {
      const std::size_t m = r * b.seq + s;
      if (!h.valid[m]) continue;
      if (options.group_of && !group) group = &progress.calibration.group(options.group_of({k, r, progress.sequences}));
      const auto predicted = h.ovr.pred[m], label = b.labels[m];
      const double confidence = static_cast<double>(h.ovr.max_prob[m]), prob_sum = static_cast<double>(h.ovr.prob_sum[m]);
      if (confidence >= 0 && confidence <= 1 && std::isfinite(prob_sum)) {
        progress.calibration.overall().tokens.add(predicted, label, confidence, prob_sum);
        if (group) group->tokens.add(predicted, label, confidence, prob_sum);
      } else {
        ++e.non_finite;
      }
      if (!h.num[m]) continue;
      const bool predicted_num = predicted == num;
      const double y = static_cast<double>(b.target_values[m]);
      const double loc = static_cast<double>(h.regression.loc_Y[m]), scale = static_cast<double>(h.regression.scale_Y[m]);
      ++e.numbers;
      e.num_correct += predicted_num;
      e.abs_error += std::fabs(loc - y);
      if (std::isfinite(y) && std::isfinite(loc) && scale > 0 && std::isfinite(scale)) {
        progress.calibration.overall().numbers.add(y, loc, scale);
        if (group) group->numbers.add(y, loc, scale);
      } else {
        ++e.non_finite;
      }
      if (on_number) on_number({k, r, s, y, loc, scale, static_cast<double>(h.regression.P_num[m]), predicted_num});
    }
  }
}

/// The evaluation's means and calibration report, once every batch is in.
inline void finish(Evaluation& e, const Progress& progress) {
  e.metrics = progress.mean.mean();
  e.calibration = progress.calibration.report();
}

}  // namespace detail_evaluate

/// Evaluates `model` on every batch of `batches`, in order (see the file comment).
template <class T>
Evaluation evaluate(model::CausalQwen<T>& model, std::type_identity_t<std::span<const BatchData<T>>> batches,
                    const NumberCallback& on_number = {}, const EvaluationOptions& options = {}) {
  Evaluation e;
  detail_evaluate::Progress progress{{}, {model.config().num_token_id, options.baseline_value, model.config().reg_head}, 0};
  typename model::CausalQwen<T>::Cache cache;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    detail_evaluate::add_batch(model, batches[k], k, e, progress, cache, on_number, options);
    if (options.on_batch) options.on_batch(k + 1, batches.size());
  }
  detail_evaluate::finish(e, progress);
  return e;
}

/// Evaluates `model` on the next `count` batches of `source` (see the file comment); the source
/// moves on by `count` batches.
template <class T>
Evaluation evaluate(model::CausalQwen<T>& model, TokenBatchSource<T>& source, std::size_t count,
                    const NumberCallback& on_number = {}, const EvaluationOptions& options = {}) {
  Evaluation e;
  detail_evaluate::Progress progress{{}, {model.config().num_token_id, options.baseline_value, model.config().reg_head}, 0};
  typename model::CausalQwen<T>::Cache cache;
  for (std::size_t k = 0; k < count; ++k) {
    detail_evaluate::add_batch(model, source.next(), k, e, progress, cache, on_number, options);
    if (options.on_batch) options.on_batch(k + 1, count);
  }
  detail_evaluate::finish(e, progress);
  return e;
}

}  // namespace causalqwen::train
