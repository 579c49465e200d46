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
class StreamingOptimizer final : public Optimizer<T> {
 public:
  StreamingOptimizer(std::shared_ptr<const Layout> layout, optim::AdamWConfig config, ParamRules rules,
                     optim::MomentStorage storage, std::size_t keep_tiles_bytes, double clip, std::size_t micro_batches)
      : adam_(std::move(layout), config, std::move(rules), storage), clip_(clip), micro_batches_(micro_batches) {
    adam_.set_tile_cache_bytes(keep_tiles_bytes);
  }

  /// The factors and small gradients are cleared by the previous step (StreamingAdamW::step).
  void begin_step() override {}
  /// Every micro-batch: StreamingAdamW's target (weight gradients appended as factors).
  linalg::GradientTarget<T> target(std::size_t) override { return adam_.target(); }
  /// The follower is not told: StreamingAdamW updates tile by tile, and the copies know they are
  /// stale by the parameters' version.
  StepResult finish_step(Arena<T>& params, UpdateFollower<T>*, double lr) override {
    const double mean_factor = 1.0 / static_cast<double>(micro_batches_);  // the mean over micro-batches
    const double norm = adam_.grad_norm(params) * mean_factor;
    adam_.step(params, lr, mean_factor * optim::clip_factor(norm, clip_));
    return {norm, 0};
  }
  std::size_t state_bytes() const override { return adam_.state_bytes(); }
  std::uint64_t steps() const override { return adam_.steps(); }
  std::filesystem::path save(const std::filesystem::path& out, const Learner<T>& learner, const TrainerState& state,
                             const CheckpointHook& before_commit) override {
    return write_checkpoint(out, learner, adam_, state, before_commit);
  }
  std::optional<ResumePoint> resume(const std::filesystem::path& out, Learner<T>& learner) override {
    return detail_optimizer::resume_whole(out, learner, adam_);
  }

 private:
  optim::StreamingAdamW<T> adam_;
  double clip_;
  std::size_t micro_batches_;
};

}  // namespace causalqwen::train
