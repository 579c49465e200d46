/// Umbrella header of the optimiser layer: AdamW, StreamingAdamW and SGD over arenas, gradient clipping, learning-rate
/// and α schedules, scale clamps. What they train and decay is data given by the caller
/// (core/param_rules.hpp; the model's own rules: model/parameter_rules.hpp).
#pragma once
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/clip.hpp"
#include "causalqwen/optim/scale_clamp.hpp"
#include "causalqwen/optim/schedule.hpp"
#include "causalqwen/optim/sgd.hpp"
#include "causalqwen/optim/streaming_adamw.hpp"
