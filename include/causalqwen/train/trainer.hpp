/// The training loop. Each step s = 0 … steps−1:
///   α ← alpha.at(s), and λ ← lambda.at(s) when a λ schedule is given (set on the learner)
///   optimizer.begin_step()
///   for each of A micro-batches a: learner.train_micro_batch(optimizer.target(a))  (grads += ∂L/∂θ)
///   optimizer.finish_step(params, follower, lr.at(s)): g ← grads / A;  ‖g‖;  AdamW step on
///   g·clip_factor(‖g‖, clip) (train/optimizer.hpp);  then the scale clamp
///   (what is trained and decayed, and the clamped slot: model::parameter_rules of the
///   learner's layout under `parameters`)
///   log the step (metrics averaged over the A micro-batches, lr, α, ‖g‖, tokens/s) to the JSONL log
///   every eval_every steps: the validation batches (same batches every time), logged as "val"
///   every checkpoint_every steps and at the end: a checkpoint (training_state.hpp)
/// The constructor chooses the optimiser once: WholeAdamW (AdamW over a gradient arena,
/// whole_adamw.hpp), with `streaming` StreamingOptimizer (no gradient arena: the micro-batches'
/// weight gradients kept as factors, streaming_optimizer.hpp; `moments` chooses float or
/// bfloat16 moments), with N > 1 processes ShardedAdamW (sharded_adamw.hpp).
/// The trainer prints nothing: it tells `options.observer` (train_observer.hpp) where the run
/// starts, each step, each validation and the end; a program shows progress from there.
/// With `resume`, the loop continues from the latest checkpoint in out_dir: parameters, moments,
/// step, RNG and data position are restored and the metrics log is cut back to that step, so the
/// resumed run's per-step values equal an uninterrupted run's bit for bit (same thread count).
///
/// Data parallelism (`options.comm` of N > 1 processes, e.g. started by mpirun): the A
/// micro-batches of a step are split by a fixed rule — process r trains micro-batches r, r+N,
/// r+2N, … (A must be a multiple of N) and draws the others without computing them, so data
/// position and RNG stay the same everywhere. ShardedAdamW sums the gradients over processes
/// into each process's range while the last micro-batch's backward pass runs, updates that range
/// with its shard of the moments (ZeRO stage 1: optimiser memory 1/N per process) and
/// all-gathers the ranges. Metrics are summed over processes in rank order; validation batches
/// are split the same way. Checkpoints have the one-process format (process 0 gathers the
/// moments and writes), so a run resumes on any number of processes; on resume process 0 reads
/// the checkpoint and sends each process its part, so only process 0 needs to see out_dir.
/// Logs, the observer and checkpoint files: process 0 only.
/// StreamingAdamW keeps each micro-batch's weight gradients as factors that only its own process
/// holds; summing them over processes would mean forming the whole gradient, which is what it
/// avoids: it is refused with N > 1.
#pragma once
#include "causalqwen/core/process_usage.hpp"
#include "causalqwen/dist/communicator.hpp"
#include "causalqwen/model/parameter_rules.hpp"
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/scale_clamp.hpp"
#include "causalqwen/optim/schedule.hpp"
#include "causalqwen/train/learner.hpp"
#include "causalqwen/train/metrics_log.hpp"
#include "causalqwen/train/metrics_mean.hpp"
#include "causalqwen/train/optimizer.hpp"
#include "causalqwen/train/sharded_adamw.hpp"
#include "causalqwen/train/streaming_optimizer.hpp"
#include "causalqwen/train/train_observer.hpp"
#include "causalqwen/train/training_state.hpp"
#include "causalqwen/train/whole_adamw.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

namespace causalqwen::train {

struct TrainerOptions {
  std::size_t steps = 100;
  std::size_t accumulation = 1;      // micro-batches per optimiser step
  double clip = 1.0;                 // global-norm clip (≤ 0: none)
  optim::LrSchedule lr;              // lr.total is set to `steps` when left at 0
  optim::AlphaSchedule alpha;
  std::optional<optim::AnnealSchedule> lambda;  // λ of each step (none: the model's own, unchanged)
  optim::AdamWConfig adam;
  bool streaming = false;            // optim::StreamingAdamW instead of AdamW + a gradient arena
  std::size_t keep_tiles_bytes = 0;  // streaming: memory for the norm's tiles, reused by the update
  optim::MomentStorage moments = optim::MomentStorage::full;  // the optimiser's moments: T or bfloat16 (float only)
  model::ParameterOptions parameters;  // frozen group, learnable threshold (model/parameter_rules.hpp)
  optim::ScaleClamp scale_clamp;       // bounds on the abduction scale (none by default)
  TrainNoise noise;
  std::size_t eval_every = 0;        // 0: only at the end (when there is a validation source)
  std::size_t eval_batches = 4;
  std::size_t checkpoint_every = 0;  // 0: only at the end
  std::filesystem::path out_dir;     // checkpoints go to out_dir/checkpoints (empty: none)
  std::filesystem::path metrics_path;  // JSONL (empty: out_dir/metrics.jsonl, or none without out_dir)
  bool resume = false;
  std::uint64_t seed = 1;            // the trainer RNG (sampling-mode noise)
  TrainObserver observer;            // told of the start, each step, each validation, the end
  nlohmann::json run_settings = nlohmann::json::object();  // recorded in checkpoints
  dist::Communicator comm = dist::Communicator::local();  // the processes training together
  std::size_t bucket_elements = std::size_t{1} << 22;     // gradient elements per reduce-scatter
};

/// What a run ends with.
struct TrainSummary {
  std::size_t first_step = 0, last_step = 0;  // steps done before this run (resume) and after
  model::HeadMetrics last_train;
  std::optional<model::HeadMetrics> first_val, last_val;
  double seconds = 0, tokens_per_s = 0;
  ProcessUsage usage;  // what the run cost the kernel: minor page faults, system time
  std::optional<std::filesystem::path> checkpoint;
  double comm_seconds = 0;  // inside collectives (all steps of this run; 0 for one process)
  std::size_t optimizer_bytes = 0;  // optimiser state held by this process (its shard with N > 1)
};

template <class T>
class Trainer {
 public:
  Trainer(Learner<T>& learner, TrainerOptions options)
      : learner_(learner), o_(std::move(options)),
        rules_(model::parameter_rules(learner.params().layout(), o_.parameters)), rng_(o_.seed) {
    detail::require(o_.steps > 0 && o_.accumulation > 0, "Trainer", "steps and accumulation must be > 0");
    const std::size_t N = processes();
    detail::require(N == 1 || !o_.streaming, "Trainer",
                    "the streaming optimiser cannot train on {} processes: it keeps each micro-batch's weight gradients "
                    "as factors held by one process, and summing them over processes would form the whole gradient it "
                    "exists to avoid; use AdamW (--optimizer adamw), whose optimiser state is split over the processes",
                    N);
    detail::require(o_.accumulation % N == 0, "Trainer",
                    "{} micro-batches per step (accumulation) cannot be split evenly over {} processes: choose a "
                    "multiple of {}", o_.accumulation, N, N);
    ranges_ = shard_ranges(learner.params().size(), N);
    detail::require(o_.streaming || o_.keep_tiles_bytes == 0, "Trainer",
                    "keep_tiles_bytes ({}) is memory for the streaming optimiser's tiles; AdamW forms no tiles",
                    o_.keep_tiles_bytes);
    optimizer_ = make_optimizer();
    if (o_.lr.total == 0) o_.lr.total = o_.steps;
    if (o_.metrics_path.empty() && !o_.out_dir.empty()) o_.metrics_path = o_.out_dir / "metrics.jsonl";
  }

  /// The optimiser chosen by TrainerOptions (streaming; processes).
  Optimizer<T>& optimizer() { return *optimizer_; }
  const TrainerOptions& options() const { return o_; }

  /// Runs (or resumes) to options().steps; see the file comment.
  TrainSummary run() {
    TrainSummary summary;
    Progress at = start(summary);
    MetricsLog log;
    if (!o_.metrics_path.empty() && root()) log = MetricsLog(o_.metrics_path, /*append=*/at.step > 0);
    if (o_.observer.on_start && root())
      o_.observer.on_start({at.step, o_.steps, at.step > 0 ? summary.checkpoint : std::optional<std::filesystem::path>{}});
    const auto run_start = clock::now();
    const auto usage_start = ProcessUsage::now();
    double last_tps = 0;
    const std::size_t N = processes(), A = o_.accumulation;
    while (at.step < o_.steps) {
      if (o_.observer.on_step_begin) o_.observer.on_step_begin(at.step);
      const auto t0 = clock::now();
      const double alpha = o_.alpha.at(at.step), lr = o_.lr.at(at.step);
      learner_.set_alpha_gate(alpha);
      if (o_.lambda) learner_.set_reg_loss_weight(o_.lambda->at(at.step));
      optimizer_->begin_step();
      MetricsMean mean;
      std::size_t tokens = 0;
      for (std::size_t a = 0; a < A; ++a) {
        if (a % N != rank()) {  // another process's micro-batch
          learner_.skip_micro_batch(o_.noise, rng_);
          continue;
        }
        const auto r = learner_.train_micro_batch(optimizer_->target(a), o_.noise, rng_);
        mean.add(r.metrics);
        tokens += r.tokens;
      }
      auto result = optimizer_->finish_step(learner_.params(), learner_.update_follower(), lr);
      if (N > 1) {
        const auto t_metrics = clock::now();
        mean = combined(mean, tokens);
        result.comm_seconds += seconds_between(t_metrics, clock::now());
      }
      // the optimisers bump the version; a clamp that moves a value bumps it again
      if (o_.scale_clamp.apply(learner_.params(), rules_) > 0) learner_.params().touch();
      ++at.step;
      const double dt = seconds_between(t0, clock::now());
      last_tps = dt > 0 ? static_cast<double>(tokens) / dt : 0;
      at.tokens_seen += static_cast<double>(tokens);
      summary.comm_seconds += result.comm_seconds;
      summary.last_train = mean.mean();
      if (root()) log_step(log, {at.step, o_.steps, summary.last_train, lr, alpha, result.grad_norm, tokens, last_tps, dt},
                           result.comm_seconds);
      const bool last = at.step == o_.steps;
      if (learner_.has_validation() && ((o_.eval_every > 0 && at.step % o_.eval_every == 0) || last))
        validate(log, at.step, summary);
      if (!o_.out_dir.empty() && ((o_.checkpoint_every > 0 && at.step % o_.checkpoint_every == 0) || last))
        summary.checkpoint = checkpoint(at, at.seconds_before + seconds_between(run_start, clock::now()));
    }
    if (o_.observer.on_finish && root()) o_.observer.on_finish();
    summary.last_step = at.step;
    summary.seconds = seconds_between(run_start, clock::now());
    summary.tokens_per_s = last_tps;
    summary.usage = ProcessUsage::now() - usage_start;
    summary.optimizer_bytes = optimizer_->state_bytes();
    return summary;
  }

  /// The validation metrics: eval_batches batches from the start of the validation source,
  /// averaged with equal weights (with N processes, batch i is evaluated by process i mod N).
  model::HeadMetrics evaluate() {
    learner_.rewind_validation();
    MetricsMean mean;
    std::size_t unused_tokens = 0;
    for (std::size_t i = 0; i < o_.eval_batches; ++i) {
      if (i % processes() == rank()) mean.add(learner_.eval_micro_batch().metrics);
      else learner_.skip_eval_micro_batch();
    }
    return (processes() > 1 ? combined(mean, unused_tokens) : mean).mean();
  }

  /// Processes training together, and this one's index.
  std::size_t processes() const { return static_cast<std::size_t>(o_.comm.size()); }
  std::size_t rank() const { return static_cast<std::size_t>(o_.comm.rank()); }
  /// Each process's range of the parameters (its optimiser shard).
  const std::vector<ElementRange>& ranges() const { return ranges_; }

 private:
  using clock = std::chrono::steady_clock;

  /// Where the run is: steps done, tokens seen and seconds spent before this run (resume).
  struct Progress {
    std::size_t step = 0;
    double tokens_seen = 0, seconds_before = 0;
  };

  bool root() const { return o_.comm.is_root(); }

  /// The run's start: locks out_dir, resumes from its latest checkpoint (with `resume`: the
  /// parameters, moments, RNG and data position; the metrics log cut back to that step), and
  /// with N > 1 gives every process process 0's parameters.
  Progress start(TrainSummary& summary) {
    Progress at;
    if (!o_.out_dir.empty() && root()) lock_out_dir();
    if (o_.resume && !o_.out_dir.empty()) {
      if (auto point = optimizer_->resume(o_.out_dir, learner_)) {
        summary.checkpoint = point->dir;
        const TrainerState& st = point->state;
        if (st.step > o_.steps)
          throw FormatError(fmt::format("{}: the checkpoint is at step {}, past this run's {} steps (give --steps {} or "
                                        "more to continue it)",
                                        summary.checkpoint ? summary.checkpoint->string() : o_.out_dir.string(), st.step,
                                        o_.steps, st.step));
        restore_rng(rng_, st.rng);
        learner_.restore_data_state(st.data);
        at.step = st.step;
        at.tokens_seen = st.tokens_seen;
        at.seconds_before = st.seconds;
        if (!o_.metrics_path.empty() && root()) truncate_metrics(o_.metrics_path, at.step);
      }
    }
    if (processes() > 1) {  // every process starts from process 0's parameters
      o_.comm.broadcast(learner_.params().span());
      learner_.params().touch();
    }
    summary.first_step = at.step;
    return at;
  }

  /// The step's line of the metrics log, and the observer told (process 0).
  void log_step(MetricsLog& log, const StepReport& info, double comm_seconds) {
    auto rec = metrics_json(info.metrics);
    rec["split"] = "train";
    rec["step"] = info.step;
    rec["lr"] = info.lr;
    rec["alpha"] = info.alpha;
    rec["lambda"] = learner_.reg_loss_weight();
    rec["grad_norm"] = info.grad_norm;
    rec["tokens"] = info.tokens;
    rec["tokens_per_s"] = info.tokens_per_s;
    rec["seconds"] = info.seconds;
    if (processes() > 1) {
      rec["processes"] = processes();
      rec["comm_seconds"] = comm_seconds;
    }
    log.write(rec);
    if (o_.observer.on_step) o_.observer.on_step(info);
  }

  /// The validation metrics after `step`, into the summary, the log and the observer.
  void validate(MetricsLog& log, std::size_t step, TrainSummary& summary) {
    const auto v = evaluate();
    if (!summary.first_val) summary.first_val = v;
    summary.last_val = v;
    if (root()) {
      auto vr = metrics_json(v);
      vr["split"] = "val";
      vr["step"] = step;
      log.write(vr);
      if (o_.observer.on_validation) o_.observer.on_validation({step, v});
    }
  }

  /// Writes the checkpoint after `at.step` (the optimiser gathers what it holds to process 0);
  /// `seconds` is the run time so far, earlier runs included.
  std::filesystem::path checkpoint(const Progress& at, double seconds) {
    TrainerState st;
    st.step = at.step;
    st.adam_steps = optimizer_->steps();
    st.rng = rng_state(rng_);
    st.data = learner_.data_state();
    st.tokens_seen = at.tokens_seen;
    st.seconds = seconds;
    st.run = o_.run_settings;
    const auto commit_hook = [this, step = st.step](const auto&) {
      if (o_.observer.on_checkpoint_commit) o_.observer.on_checkpoint_commit(step);
    };
    return optimizer_->save(o_.out_dir, learner_, st, commit_hook);
  }

  /// The optimiser of the options: StreamingAdamW, AdamW over a gradient arena, or with N > 1
  /// AdamW over this process's range.
  std::unique_ptr<Optimizer<T>> make_optimizer() const {
    const auto layout = learner_.params().shared_layout();
    if (o_.streaming)
      return std::make_unique<StreamingOptimizer<T>>(layout, o_.adam, rules_, o_.moments, o_.keep_tiles_bytes, o_.clip,
                                                     o_.accumulation);
    if (processes() == 1)
      return std::make_unique<WholeAdamW<T>>(optim::AdamW<T>(layout, o_.adam, rules_, o_.moments),
                                             learner_.make_gradients(), o_.clip, o_.accumulation);
    return std::make_unique<ShardedAdamW<T>>(layout, o_.adam, rules_, o_.moments, o_.comm, ranges_, o_.bucket_elements,
                                             learner_.make_gradients(), o_.clip, o_.accumulation);
  }

  /// Holds an exclusive lock on out_dir/.lock for the trainer's life: a second run writing the
  /// same directory (e.g. a resume started while the first run still lives) is refused.
  void lock_out_dir() {
    if (lock_fd_ >= 0) return;
    std::filesystem::create_directories(o_.out_dir);
    const auto path = o_.out_dir / ".lock";
    lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
      throw DomainError(fmt::format("causalqwen::train::Trainer: {} is in use by another training run", o_.out_dir.string()));
  }

  static double seconds_between(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  /// The metrics summed over every process (in rank order, so all get the same bits), and the
  /// tokens likewise.
  MetricsMean combined(const MetricsMean& mine, std::size_t& tokens) const {
    const auto& m = mine.sum;
    const std::array<double, 14> local{m.L_cls_mean, m.L_reg_eff, m.L_total, m.reg_mae, m.units_mean_loc,
                                       m.units_mean_scale, m.ovr_prob_sum, m.accuracy, m.num_accuracy, m.mean_P_num,
                                       static_cast<double>(m.valid_count), static_cast<double>(m.num_count),
                                       static_cast<double>(mine.n), static_cast<double>(tokens)};
    auto& all = gathered_metrics_;  // kept: a step allocates nothing
    all.resize(local.size() * processes());
    o_.comm.all_gather(local, all);
    std::array<double, 14> total{};
    for (std::size_t r = 0; r < processes(); ++r)
      for (std::size_t i = 0; i < local.size(); ++i) total[i] += all[r * local.size() + i];
    MetricsMean out;
    auto& t = out.sum;
    t.L_cls_mean = total[0], t.L_reg_eff = total[1], t.L_total = total[2], t.reg_mae = total[3];
    t.units_mean_loc = total[4], t.units_mean_scale = total[5], t.ovr_prob_sum = total[6], t.accuracy = total[7];
    t.num_accuracy = total[8], t.mean_P_num = total[9];
    t.valid_count = static_cast<std::size_t>(total[10]), t.num_count = static_cast<std::size_t>(total[11]);
    out.n = static_cast<std::size_t>(total[12]);
    tokens = static_cast<std::size_t>(total[13]);
    return out;
  }

  Learner<T>& learner_;
  TrainerOptions o_;
  ParamRules rules_;                                  // the model's rules for the learner's slots
  std::unique_ptr<Optimizer<T>> optimizer_;           // chosen once, by the options
  std::mt19937_64 rng_;
  std::vector<ElementRange> ranges_;                  // each process's range of the parameters
  mutable std::vector<double> gathered_metrics_;      // combined()'s scratch
  int lock_fd_ = -1;

 public:
  ~Trainer() {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
};

}  // namespace causalqwen::train
