// How the library's programs (the causalqwen program, the benchmarks) have idle OpenMP threads
// wait. libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT before main, so a program that wants
// other defaults than libgomp's sets them and starts itself again.
#pragma once
#include <strings.h>
#include <unistd.h>

#include <cstdlib>

namespace cqcli {

/// Idle OpenMP threads spin by default for 300,000 spins after each parallel region (libgomp's
/// default) and take the cores the next region needs (another thread pool's, another process's);
/// sleeping at once (PASSIVE with no spin count) costs a futex wake-up per region instead, which a
/// training step of many short regions feels. A program that wants a better policy without asking
/// its user calls this first thing in main: when OMP_WAIT_POLICY is unset it sets PASSIVE, and when the policy is (or becomes) PASSIVE with GOMP_SPINCOUNT unset it
/// sets a short spin before sleeping (GOMP_SPINCOUNT=10000); if it set either, it
/// executes the program again (/proc/self/exe, Linux) with the same `argv`, and the set
/// variables stop a second restart. Returns at once when nothing was set (ACTIVE, or a spin
/// count chosen by the user), or when the restart failed (the program then goes on with the
/// settings it started with).
inline void restart_with_passive_omp_wait(char** argv) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  bool changed = false;
  if (policy == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  } else if (::strcasecmp(policy, "PASSIVE") != 0) {  // libgomp reads it in any case
    return;
  }
  if (std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", "10000", 1);
    changed = true;
  }
  if (changed) ::execv("/proc/self/exe", argv);  // returns only on failure
}

}  // namespace cqcli
