/// Umbrella header of the training layer: batch sources, learners (whole model or heads alone),
/// the trainer with its logs, progress display, curves and crash-safe checkpoints.
#pragma once
#include "causalqwen/optim.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/train/learner.hpp"
#include "causalqwen/train/metrics_log.hpp"
#include "causalqwen/train/progress.hpp"
#include "causalqwen/train/svg_plot.hpp"
#include "causalqwen/train/trainer.hpp"
#include "causalqwen/train/training_curves.hpp"
#include "causalqwen/train/training_state.hpp"
