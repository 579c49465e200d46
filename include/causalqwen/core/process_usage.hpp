/// What the process has cost the kernel so far: minor page faults and system time (getrusage),
/// besides user time and the wall clock. A slow loop on a virtual machine is often one that
/// frees and maps memory again at every step; the difference of two snapshots shows it.
#pragma once
#include <sys/resource.h>

#include <chrono>

namespace causalqwen {

/// One reading of getrusage(RUSAGE_SELF) and the steady clock.
struct ProcessUsage {
  long minor_faults = 0;
  double user_seconds = 0, system_seconds = 0, wall_seconds = 0;

  static ProcessUsage now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    const auto wall = std::chrono::steady_clock::now().time_since_epoch();
    return {u.ru_minflt, seconds(u.ru_utime), seconds(u.ru_stime), std::chrono::duration<double>(wall).count()};
  }

  /// This reading minus an earlier one: what the interval between them cost.
  ProcessUsage operator-(const ProcessUsage& earlier) const {
    return {minor_faults - earlier.minor_faults, user_seconds - earlier.user_seconds,
            system_seconds - earlier.system_seconds, wall_seconds - earlier.wall_seconds};
  }

  /// System time as a share of the wall clock (0 for an empty interval).
  double system_share() const { return wall_seconds > 0 ? system_seconds / wall_seconds : 0.0; }
};

}  // namespace causalqwen
