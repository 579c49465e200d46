// What a benchmark's timed iterations cost the kernel, as Google Benchmark counters.
#pragma once
#include <benchmark/benchmark.h>

#include <causalqwen/core/process_usage.hpp>

namespace cqbench {

/// Sets `st`'s counters from the process's usage since `start` (taken just before the timed
/// loop): faults_per_step, the minor page faults per iteration, and sys_pct, the system time
/// in % of the wall time.
inline void report_usage(benchmark::State& st, const causalqwen::ProcessUsage& start) {
  const auto usage = causalqwen::ProcessUsage::now() - start;
  st.counters["faults_per_step"] = double(usage.minor_faults) / double(st.iterations());
  st.counters["sys_pct"] = 100.0 * usage.system_share();
}

}  // namespace cqbench
