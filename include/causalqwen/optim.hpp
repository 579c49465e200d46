/// Umbrella header of the optimiser layer: AdamW, StreamingAdamW and SGD over arenas, gradient clipping, learning-rate
/// and α schedules, scale clamps, and the rules deciding what is trained and decayed.
#pragma once
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/clip.hpp"
#include "causalqwen/optim/param_rules.hpp"
#include "causalqwen/optim/scale_clamp.hpp"
#include "causalqwen/optim/schedule.hpp"
#include "causalqwen/optim/sgd.hpp"
#include "causalqwen/optim/streaming_adamw.hpp"
