/// The equal-weight mean of several batches' HeadMetrics: the trainer's step metrics (the mean
/// over its micro-batches, the loss whose gradient the step applies), its validation metrics
/// and evaluate()'s `metrics`. Counts (valid_count, num_count) are summed, not averaged.
#pragma once
#include "causalqwen/model/causal_head.hpp"

#include <cstddef>

namespace causalqwen::train {

struct MetricsMean {
  model::HeadMetrics sum;
  std::size_t n = 0;

  /// sum ← sum + m (field by field); n ← n + 1.
  void add(const model::HeadMetrics& m) {
    sum.L_cls_mean += m.L_cls_mean, sum.L_reg_eff += m.L_reg_eff, sum.L_total += m.L_total;
    sum.reg_mae += m.reg_mae, sum.units_mean_loc += m.units_mean_loc, sum.units_mean_scale += m.units_mean_scale;
    sum.ovr_prob_sum += m.ovr_prob_sum, sum.accuracy += m.accuracy, sum.num_accuracy += m.num_accuracy;
    sum.mean_P_num += m.mean_P_num, sum.valid_count += m.valid_count, sum.num_count += m.num_count;
    ++n;
  }
  /// sum · (1/n) for every mean field (0 when n = 0); the counts stay sums.
  model::HeadMetrics mean() const {
    model::HeadMetrics m = sum;
    const double k = n ? 1.0 / static_cast<double>(n) : 0.0;
    for (double* v : {&m.L_cls_mean, &m.L_reg_eff, &m.L_total, &m.reg_mae, &m.units_mean_loc,
                      &m.units_mean_scale, &m.ovr_prob_sum, &m.accuracy, &m.num_accuracy, &m.mean_P_num})
      *v *= k;
    return m;
  }
};

}  // namespace causalqwen::train
