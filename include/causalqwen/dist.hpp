/// Processes that train one model together (data parallelism over MPI): the communicator and
/// the bucketed gradient sum. The trainer (train/trainer.hpp) uses them through
/// TrainerOptions::comm.
#pragma once
#include "causalqwen/dist/communicator.hpp"
#include "causalqwen/dist/gradient_buckets.hpp"
