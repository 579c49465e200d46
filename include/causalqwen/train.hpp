/// Umbrella header of the training layer: batch sources, learners (whole model or heads alone),
/// JSON batches, teacher-forced evaluation (its calibration statistics are eval/'s), the
/// trainer with its metrics log, its observer interface and crash-safe checkpoints. (Progress
/// bars and curve pictures belong to programs: the causalqwen program's are in
/// tools/causalqwen/.)
#pragma once
#include "causalqwen/optim.hpp"
#include "causalqwen/train/batch_json.hpp"
#include "causalqwen/train/batch_list_source.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/train/evaluate.hpp"
#include "causalqwen/train/learner.hpp"
#include "causalqwen/train/metrics_log.hpp"
#include "causalqwen/train/metrics_mean.hpp"
#include "causalqwen/train/train_observer.hpp"
#include "causalqwen/train/trainer.hpp"
#include "causalqwen/train/training_state.hpp"
