/// optim::StreamingAdamW behind train/optimizer.hpp's interface: every micro-batch's weight
/// gradients kept as factors (target() of StreamingAdamW), then
///   ‖g‖ = ‖Σ_a g_a‖ / A  (grad_norm of the sum, times the mean's factor 1/A)
///   StreamingAdamW::step(θ, lr, clip_factor(‖g‖, clip) / A)
/// No whole gradient arena is formed, so the factors stay with this process: one process only.
#pragma once
#include "causalqwen/optim/clip.hpp"
#include "causalqwen/optim/streaming_adamw.hpp"
#include "causalqwen/train/optimizer.hpp"

#include <memory>
#include <utility>

namespace causalqwen::train {

template <class T>
class StreamingOptimizer final : public detail_optimizer::OneProcess<T, optim::StreamingAdamW<T>> {
  using Base = detail_optimizer::OneProcess<T, optim::StreamingAdamW<T>>;
  using Base::adam_, Base::clip_, Base::micro_batches_;

 public:
  StreamingOptimizer(std::shared_ptr<const Layout> layout, optim::AdamWConfig config, ParamRules rules,
                     optim::MomentStorage storage, std::size_t keep_tiles_bytes, double clip, std::size_t micro_batches)
      : Base(clip, micro_batches, std::move(layout), config, std::move(rules), storage) {
    adam_.set_tile_cache_bytes(keep_tiles_bytes);
  }

  /// The factors and small gradients are cleared by the previous step (StreamingAdamW::step).
  void begin_step() override {}
  /// Every micro-batch: StreamingAdamW's target (weight gradients appended as factors).
  linalg::GradientTarget<T> target(std::size_t) override { return adam_.target(); }
  /// The follower is not told: StreamingAdamW updates tile by tile, and the copies know they are
  /// stale by the parameters' version.
  StepResult finish_step(Arena<T>& params, linalg::UpdateFollower<T>*, double lr) override {
    const double mean_factor = 1.0 / static_cast<double>(micro_batches_);  // the mean over micro-batches
    const double norm = adam_.grad_norm(params) * mean_factor;
    adam_.step(params, lr, mean_factor * optim::clip_factor(norm, clip_));
    return {norm, 0};
  }
};

}  // namespace causalqwen::train
