/// AdamW over this process's shard of the parameters, N > 1 processes (ZeRO stage 1), behind
/// train/optimizer.hpp's interface. Process r owns ranges[r] and its moments only:
///   target(a)     the whole gradient arena; the last micro-batch this process trains
///                 (a + N ≥ A) also tells the buckets which gradients are final, so their
///                 reduce-scatter (dist/gradient_buckets.hpp) overlaps its backward pass
///   finish_step   the buckets finish: owned ← Σ_processes g[ranges[r]];  owned ← owned / A (A > 1)
///                 ‖g‖ = √(Σ_processes Σ owned²) (summed in rank order, every process the same)
///                 AdamW on the owned range with clip_factor(‖g‖, clip);  all-gather of the ranges
/// Checkpoints have the one-process format: process 0 gathers the moments into an AdamW owning
/// every element and writes; on resume it reads and scatters them (only it sees out_dir).
#pragma once
#include "causalqwen/dist/communicator.hpp"
#include "causalqwen/dist/gradient_buckets.hpp"
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/clip.hpp"
#include "causalqwen/train/optimizer.hpp"

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace causalqwen::train {

template <class T>
class ShardedAdamW final : public Optimizer<T> {
 public:
  /// `ranges`: each process's range (shard_ranges); `gradients`: a gradient arena with the
  /// parameters' layout; `micro_batches`: A per step, a multiple of the processes.
  ShardedAdamW(std::shared_ptr<const Layout> layout, optim::AdamWConfig config, ParamRules rules,
               optim::MomentStorage storage, dist::Communicator comm, std::vector<ElementRange> ranges,
               std::size_t bucket_elements, Arena<T> gradients, double clip, std::size_t micro_batches)
      : adam_(layout, config, rules, storage, ranges[static_cast<std::size_t>(comm.rank())]), comm_(comm),
        ranges_(std::move(ranges)), grads_(std::move(gradients)), owned_grads_(adam_.owned().size()),
        buckets_(comm_, ranges_, bucket_elements), clip_(clip), micro_batches_(micro_batches) {}

  /// grads ← 0; the buckets wait for this step's gradients, to be summed into owned_grads_.
  void begin_step() override {
    grads_.zero();
    buckets_.begin(grads_, owned_grads_);
  }
  /// The gradient arena; micro-batch a is this process's last when a + N ≥ A, and its backward
  /// pass then tells the buckets which gradients are final.
  linalg::GradientTarget<T> target(std::size_t a) override {
    const bool last = a + processes() >= micro_batches_;  // this process's last micro-batch
    return linalg::GradientTarget<T>(grads_, nullptr, last ? &buckets_ : nullptr);
  }
  /// The step of the file comment; comm_seconds: the buckets' sums (GradientBuckets::seconds),
  /// the sum of squares over processes and the all-gather.
  StepResult finish_step(Arena<T>& params, linalg::UpdateFollower<T>*, double lr) override {
    buckets_.finish();
    const auto owned = adam_.owned();
    const auto& layout = params.layout();
    const auto& rules = adam_.rules();
    if (micro_batches_ > 1)
      optim::scale_owned_gradients(layout, std::span<T>(owned_grads_), owned, 1.0 / static_cast<double>(micro_batches_), rules);
    const double my_squares = optim::owned_sum_of_squares(layout, std::span<const T>(owned_grads_), owned, rules);
    const auto t_norm = clock::now();
    const double norm = std::sqrt(comm_.sum(my_squares));  // ‖g‖ of the whole gradient
    double comm_seconds = buckets_.seconds() + seconds_since(t_norm);
    // a shard's step keeps no follower current: it knows it is stale by the parameters' version
    adam_.step(params, std::span<const T>(owned_grads_), lr, optim::clip_factor(norm, clip_));
    const auto t_gather = clock::now();
    comm_.all_gather_ranges(params.data(), std::span<const ElementRange>(ranges_));
    params.touch();  // the other processes' ranges changed too
    comm_seconds += seconds_since(t_gather);
    return {norm, comm_seconds};
  }
  std::size_t state_bytes() const override { return adam_.state_bytes(); }
  std::uint64_t steps() const override { return adam_.steps(); }

  /// Gathers the moments to process 0, which writes the checkpoint; every process returns its
  /// directory.
  std::filesystem::path save(const std::filesystem::path& out, const Learner<T>& learner, const TrainerState& state,
                             const CheckpointHook& before_commit) override {
    std::optional<optim::AdamW<T>> whole;
    if (comm_.is_root()) whole.emplace(adam_.shared_layout(), adam_.config(), adam_.rules(), adam_.moment_storage());
    exchange_moments(whole ? &*whole : nullptr, /*to_root=*/true);
    if (!whole) return checkpoints_dir(out) / checkpoint_name(state.step);
    whole->set_steps(adam_.steps());
    return write_checkpoint(out, learner, *whole, state, before_commit);
  }

  /// Process 0 reads the latest checkpoint (the others need not see its files) into an
  /// optimiser owning every element, sends each process its range of the moments and everyone
  /// the trainer state; the parameters are process 0's, for the trainer to broadcast.
  std::optional<ResumePoint> resume(const std::filesystem::path& out, Learner<T>& learner) override {
    std::string text;
    std::optional<optim::AdamW<T>> whole;
    if (comm_.is_root()) {
      if (const auto dir = latest_checkpoint(out)) {
        whole.emplace(adam_.shared_layout(), adam_.config(), adam_.rules(), adam_.moment_storage());
        text = read_checkpoint(*dir, learner, *whole).to_json().dump();
      }
    }
    comm_.broadcast_text(text);
    if (text.empty()) return std::nullopt;
    auto st = TrainerState::from_json(nlohmann::json::parse(text), "the trainer state sent by process 0");
    exchange_moments(whole ? &*whole : nullptr, /*to_root=*/false);
    adam_.set_steps(st.adam_steps);
    const auto dir = checkpoints_dir(out) / checkpoint_name(st.step);
    return ResumePoint{std::move(st), dir};
  }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }
  std::size_t processes() const { return static_cast<std::size_t>(comm_.size()); }

  /// Moves the moments between this process's shard and process 0's optimiser `whole` (which
  /// owns every element; null on the other processes): gathers them to it (to_root) or
  /// scatters them from it.
  void exchange_moments(optim::AdamW<T>* whole, bool to_root) {
    const std::size_t n = adam_.owned().size();
    const auto ranges = std::span<const ElementRange>(ranges_);
    const auto move = [&](auto& mine, auto* all) {  // Arena<E>& and Arena<E>* of T or bfloat16 bits
      using E = std::remove_reference_t<decltype(*mine.data())>;
      if (to_root) comm_.gather_ranges(std::span<const E>(mine.data(), n), all ? all->data() : nullptr, ranges);
      else comm_.scatter_ranges(all ? static_cast<const E*>(all->data()) : nullptr, std::span<E>(mine.data(), n), ranges);
    };
    if (adam_.moment_storage() == optim::MomentStorage::full) {
      move(adam_.first_moment(), whole ? &whole->first_moment() : nullptr);
      move(adam_.second_moment(), whole ? &whole->second_moment() : nullptr);
    } else {
      move(adam_.first_moment_bf16(), whole ? &whole->first_moment_bf16() : nullptr);
      move(adam_.second_moment_bf16(), whole ? &whole->second_moment_bf16() : nullptr);
    }
  }

  optim::AdamW<T> adam_;
  dist::Communicator comm_;
  std::vector<ElementRange> ranges_;
  Arena<T> grads_;
  std::vector<T> owned_grads_;  // the summed gradients of this process's range
  dist::GradientBuckets<T> buckets_;
  double clip_;
  std::size_t micro_batches_;
};

}  // namespace causalqwen::train
