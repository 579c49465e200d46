/// AdamW over a whole gradient arena, on one process (train/optimizer.hpp's interface):
///   g ← Σ_a g_a / A (in the arena; the division only when A > 1);  ‖g‖ = global_grad_norm(g)
///   AdamW::step(θ, g, lr, clip_factor(‖g‖, clip), follower)  — clipping applied in the update,
///   the learner's follower (bf16 copies) rewritten block by block with it
#pragma once
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/clip.hpp"
#include "causalqwen/train/optimizer.hpp"

#include <utility>

namespace causalqwen::train {

template <class T>
class WholeAdamW final : public detail_optimizer::OneProcess<T, optim::AdamW<T>> {
  using Base = detail_optimizer::OneProcess<T, optim::AdamW<T>>;
  using Base::adam_, Base::clip_, Base::micro_batches_;

 public:
  /// `gradients`: a gradient arena with the parameters' layout; `micro_batches`: A per step.
  WholeAdamW(optim::AdamW<T> adam, Arena<T> gradients, double clip, std::size_t micro_batches)
      : Base(clip, micro_batches, std::move(adam)), grads_(std::move(gradients)) {}

  /// grads ← 0
  void begin_step() override { grads_.zero(); }
  /// Every micro-batch adds into the one gradient arena: grads += ∂L/∂θ.
  linalg::GradientTarget<T> target(std::size_t) override { return linalg::GradientTarget<T>(grads_); }
  /// The step of the file comment; comm_seconds 0 (one process).
  StepResult finish_step(Arena<T>& params, linalg::UpdateFollower<T>* follower, double lr) override {
    const auto& rules = adam_.rules();
    if (micro_batches_ > 1) optim::scale_gradients(grads_, 1.0 / static_cast<double>(micro_batches_), rules);
    const double norm = optim::global_grad_norm(grads_, rules);
    adam_.step(params, grads_, lr, optim::clip_factor(norm, clip_), follower);
    return {norm, 0};
  }

 private:
  Arena<T> grads_;
};

}  // namespace causalqwen::train
