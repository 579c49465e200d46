/// The optimiser as the trainer sees it: one interface over AdamW with a gradient arena
/// (whole_adamw.hpp), AdamW over one process's shard (sharded_adamw.hpp) and StreamingAdamW
/// (streaming_optimizer.hpp). It owns what a step needs besides the learner's passes:
///   begin_step()                      no gradient yet
///   target(a)                         where micro-batch a of the step's A puts its gradients
///   finish_step(params, follower, lr) g ← Σ_a g_a / A;  ‖g‖;  θ ← AdamW(θ, g·clip_factor(‖g‖, clip))
///                                     (and what else the form needs: the sums over processes,
///                                     the all-gather, the follower kept current)
/// and the checkpoints of its moments (save, resume), so that Trainer::run is one loop for all.
#pragma once
#include "causalqwen/linalg/update_follower.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"
#include "causalqwen/train/training_state.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

namespace causalqwen::train {

/// What the end of a step reports: ‖g‖ before clipping, and seconds inside collectives.
struct StepResult {
  double grad_norm = 0;
  double comm_seconds = 0;
};

/// The checkpoint a run resumes from: its trainer state and its directory.
struct ResumePoint {
  TrainerState state;
  std::filesystem::path dir;
};

template <class T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Starts a step: the gradients are zero.
  virtual void begin_step() = 0;
  /// Where the backward pass of micro-batch `a` (one this process trains) puts its gradients.
  virtual linalg::GradientTarget<T> target(std::size_t a) = 0;
  /// The update from the step's gradients with learning rate `lr` (file comment); `follower`
  /// (may be null) is what the learner derives from the parameters.
  virtual StepResult finish_step(Arena<T>& params, linalg::UpdateFollower<T>* follower, double lr) = 0;
  /// Bytes of optimiser state this process holds.
  virtual std::size_t state_bytes() const = 0;
  /// Updates taken so far (t of the bias corrections).
  virtual std::uint64_t steps() const = 0;
  /// Writes the checkpoint of `state` under `out` (training_state.hpp) and returns its
  /// directory; `before_commit` runs between the files and LATEST.
  virtual std::filesystem::path save(const std::filesystem::path& out, const Learner<T>& learner,
                                     const TrainerState& state, const CheckpointHook& before_commit) = 0;
  /// Restores the parameters, moments and steps of the latest checkpoint under `out`, if any.
  virtual std::optional<ResumePoint> resume(const std::filesystem::path& out, Learner<T>& learner) = 0;
};

namespace detail_optimizer {
/// The part of an optimiser whose moments are all in this process (WholeAdamW,
/// StreamingOptimizer): its state, its steps, and checkpoints written and read whole
/// (write_checkpoint / read_checkpoint of LATEST).
template <class T, class Adam>
class OneProcess : public Optimizer<T> {
 public:
  std::size_t state_bytes() const override { return adam_.state_bytes(); }
  std::uint64_t steps() const override { return adam_.steps(); }
  std::filesystem::path save(const std::filesystem::path& out, const Learner<T>& learner, const TrainerState& state,
                             const CheckpointHook& before_commit) override {
    return write_checkpoint(out, learner, adam_, state, before_commit);
  }
  std::optional<ResumePoint> resume(const std::filesystem::path& out, Learner<T>& learner) override {
    const auto dir = latest_checkpoint(out);
    if (!dir) return std::nullopt;
    auto state = read_checkpoint(*dir, learner, adam_);
    return ResumePoint{std::move(state), *dir};
  }

 protected:
  /// `adam_args`: Adam's constructor's arguments (the optimiser is made in place).
  template <class... AdamArgs>
  OneProcess(double clip, std::size_t micro_batches, AdamArgs&&... adam_args)
      : adam_(std::forward<AdamArgs>(adam_args)...), clip_(clip), micro_batches_(micro_batches) {}
  Adam adam_;
  double clip_;
  std::size_t micro_batches_;  // A, the micro-batches of a step
};
}  // namespace detail_optimizer

}  // namespace causalqwen::train
