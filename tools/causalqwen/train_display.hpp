// What the causalqwen program shows while the library's Trainer runs: a TrainObserver that
// draws the progress bar (progress.hpp) on stdout, prints each validation and a resume as a
// line of its own, and rewrites the training curves picture (training_curves.hpp) from the
// metrics log after each validation and at the end.
#pragma once
#include "progress.hpp"
#include "training_curves.hpp"

#include <causalqwen/train/metrics_log.hpp>
#include <causalqwen/train/train_observer.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

namespace cqcli {

struct TrainDisplayOptions {
  Progress::Style style = Progress::Style::automatic;
  std::FILE* out = stdout;
  std::filesystem::path metrics_path;  // the run's JSONL log (the trainer's metrics_path)
  std::filesystem::path curves_path;   // SVG picture; empty: none
  std::optional<double> baseline_mae;  // the median baseline drawn on the reg-MAE panel
};

/// The curves picture of the log at `metrics_path` into `curves_path` (nothing when either is empty).
inline void write_training_curves(const TrainDisplayOptions& o) {
  if (o.curves_path.empty() || o.metrics_path.empty()) return;
  write_svg(o.curves_path, training_panels(causalqwen::train::read_metrics(o.metrics_path), o.baseline_mae),
            "CausalQwen training curves");
}

/// The observer described at the top of this file.
inline causalqwen::train::TrainObserver train_display(TrainDisplayOptions options) {
  namespace ct = causalqwen::train;
  struct State {
    TrainDisplayOptions o;
    std::optional<Progress> progress;
  };
  auto st = std::make_shared<State>(State{std::move(options), std::nullopt});
  ct::TrainObserver obs;
  obs.on_start = [st](const ct::RunStart& s) {
    st->progress.emplace(s.total_steps, s.first_step, st->o.out, st->o.style);
    if (s.resumed_from)
      st->progress->message(fmt::format("resumed from {} (step {})", s.resumed_from->string(), s.first_step));
  };
  obs.on_step = [st](const ct::StepReport& r) {
    st->progress->update(r.step, r.metrics.L_total, r.metrics.accuracy, r.metrics.reg_mae, r.tokens_per_s);
  };
  obs.on_validation = [st](const ct::ValidationReport& r) {
    const auto& v = r.metrics;
    st->progress->message(fmt::format("step {} validation: loss {:.4f} (cls {:.4f}, reg {:.4f}) acc {:.3f} "
                                      "<NUM> acc {:.3f} reg MAE {:.4g}",
                                      r.step, v.L_total, v.L_cls_mean, v.L_reg_eff, v.accuracy, v.num_accuracy,
                                      v.reg_mae));
    write_training_curves(st->o);
  };
  obs.on_finish = [st] {
    st->progress->finish();
    write_training_curves(st->o);
  };
  return obs;
}

}  // namespace cqcli
