/// How a training run reports while it runs: the Trainer calls the observer's functions at
/// fixed points of its loop and prints nothing itself. A program fills them with its display
/// (a progress bar, pictures of the curves); a test adds faults at fixed points (a delay, a
/// killed process). Every member may stay empty.
///
///   on_start(s)              once, before the first step; s.first_step > 0 after a resume
///   on_step_begin(s)         as step s (the count of updates done before it) begins
///   on_step(r)               after every optimiser step, once its record is in the metrics log
///   on_validation(v)         after every validation, once its record is in the metrics log
///   on_checkpoint_commit(s)  inside the checkpoint write of step s: its files are written and
///                            LATEST does not name it yet
///   on_finish()              once, after the last step and its checkpoint
///
/// With several processes training together, on_step_begin is called on every process and the
/// others on process 0 only (the process that logs and writes checkpoints).
#pragma once
#include "causalqwen/model/causal_head.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>

namespace causalqwen::train {

/// Where a run starts.
struct RunStart {
  std::size_t first_step = 0;    // steps done before this run (0, or the resumed checkpoint's step)
  std::size_t total_steps = 0;   // the run ends after step total_steps
  std::optional<std::filesystem::path> resumed_from;  // the checkpoint a resume read
};

/// One optimiser step, as written to the metrics log.
struct StepReport {
  std::size_t step = 0, total_steps = 0;  // step: 1-based count of updates done
  model::HeadMetrics metrics;             // the mean over the step's micro-batches
  double lr = 0, alpha = 0, grad_norm = 0;
  std::size_t tokens = 0;                 // tokens of the step's micro-batches (mask 1)
  double tokens_per_s = 0, seconds = 0;   // the step's throughput and wall time
};

/// One validation: the metrics over the validation batches after `step` steps.
struct ValidationReport {
  std::size_t step = 0;
  model::HeadMetrics metrics;
};

struct TrainObserver {
  std::function<void(const RunStart&)> on_start;
  std::function<void(std::size_t)> on_step_begin;
  std::function<void(const StepReport&)> on_step;
  std::function<void(const ValidationReport&)> on_validation;
  std::function<void(std::size_t)> on_checkpoint_commit;
  std::function<void()> on_finish;
};

}  // namespace causalqwen::train
