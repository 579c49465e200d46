// Faults on request for the crash-recovery tests (tests/train/resume_after_kill.sh,
// tests/dist/kill_one_process.sh): the train command reads them from its environment and adds
// them to the run's observer. The library itself never reads the environment or kills a process.
//
//   CAUSALQWEN_TRAIN_CHECKPOINT_SLEEP_MS=n  sleeps n ms inside every checkpoint write, after its
//                                           files and before LATEST names it
//   CAUSALQWEN_TRAIN_CRASH_IN_CHECKPOINT=k  kills the process (SIGKILL) at that point of its k-th
//                                           checkpoint write
//   CAUSALQWEN_TRAIN_KILL=r:k               kills process r (SIGKILL) as step k begins
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/train/train_observer.hpp>

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

namespace cqcli {

/// The non-negative integer in environment variable `name`, or -1 when it is unset; DomainError
/// naming the variable when it is set to anything else.
inline long fault_hook_number(const char* name, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0)
    throw causalqwen::DomainError(
        fmt::format("train: environment variable {} must be a non-negative integer, got '{}'", name, text));
  return v;
}

/// Adds the faults the environment asks for (see the top of this file) to `observer`, keeping
/// its callbacks; `rank` is this process's rank among those training together.
inline void add_fault_hooks(causalqwen::train::TrainObserver& observer, int rank) {
  namespace ct = causalqwen::train;
  if (const char* v = std::getenv("CAUSALQWEN_TRAIN_KILL")) {
    int r = -1, k = -1;
    char tail = 0;
    if (std::sscanf(v, "%d:%d%c", &r, &k, &tail) != 2 || r < 0 || k < 0)
      throw causalqwen::DomainError(
          fmt::format("train: environment variable CAUSALQWEN_TRAIN_KILL must be RANK:STEP (e.g. 1:10), got '{}'", v));
    if (r == rank) {
      auto next = observer.on_step_begin;
      observer.on_step_begin = [next, k](std::size_t step) {
        if (step == static_cast<std::size_t>(k)) std::raise(SIGKILL);
        if (next) next(step);
      };
    }
  }
  const char* sleep_text = std::getenv("CAUSALQWEN_TRAIN_CHECKPOINT_SLEEP_MS");
  const char* crash_text = std::getenv("CAUSALQWEN_TRAIN_CRASH_IN_CHECKPOINT");
  if (sleep_text == nullptr && crash_text == nullptr) return;
  const long sleep_ms = sleep_text ? fault_hook_number("CAUSALQWEN_TRAIN_CHECKPOINT_SLEEP_MS", sleep_text) : 0;
  const long crash_at = crash_text ? fault_hook_number("CAUSALQWEN_TRAIN_CRASH_IN_CHECKPOINT", crash_text) : 0;
  auto written = std::make_shared<long>(0);
  auto next = observer.on_checkpoint_commit;
  observer.on_checkpoint_commit = [next, written, sleep_ms, crash_at](std::size_t step) {
    ++*written;
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (crash_at > 0 && *written == crash_at) std::raise(SIGKILL);
    if (next) next(step);
  };
}

}  // namespace cqcli
