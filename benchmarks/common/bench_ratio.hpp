// Benchmarks report ratios against a baseline measured in the same run, never a bare time.
//
// RatioReporter wraps Google Benchmark's console reporter, remembers each run's time per
// iteration and its items/s, and at the end prints a table "name  time  items/s  ×baseline",
// where a benchmark's baseline is named by the part of its name after "vs:" in its label,
// or set with add_pair(candidate, baseline). CpuRatioReporter adds a second table of the same
// pairs' ratios of the main thread's CPU time.
#pragma once
#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cqbench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  /// Say that `candidate`'s speed is to be reported as a multiple of `baseline`'s.
  void add_pair(std::string candidate, std::string baseline) {
    pairs_.emplace_back(std::move(candidate), std::move(baseline));
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      seconds_[run.benchmark_name()] = run.GetAdjustedRealTime() /
                                       benchmark::GetTimeUnitMultiplier(run.time_unit);
    }
  }

  /// Seconds per iteration of a finished benchmark (0 when it did not run).
  double seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? 0.0 : it->second;
  }

  /// Prints "candidate is N.NN× baseline" for every pair whose sides both ran (a side left out
  /// by --benchmark_filter skips the pair); returns the printed ratios in order.
  std::vector<double> print_ratios() const {
    std::vector<double> ratios;
    fmt::print("\nratios (baseline time / candidate time, same run; > 1 means faster):\n");
    for (const auto& [cand, base] : pairs_) {
      const double tc = seconds(cand), tb = seconds(base);
      if (!(tc > 0 && tb > 0)) continue;
      ratios.push_back(tb / tc);
      fmt::print("  {:<60} {:8.2f}x  {}\n", cand, tb / tc, base);
    }
    if (ratios.empty()) fmt::print("  none: no pair ran both its sides (--benchmark_filter left one out, or a run failed)\n");
    return ratios;
  }

 private:
  std::map<std::string, double> seconds_;
  std::vector<std::pair<std::string, std::string>> pairs_;
};

/// The ratio reporter that also prints each pair's ratio of the main thread's CPU time per
/// iteration: on a shared machine the wall time of a run counts the time other processes held
/// the core, while the CPU time counts only this thread's own work (at 2 threads, the main
/// thread's half and not its wait for the other).
class CpuRatioReporter : public RatioReporter {
 public:
  void add_both(const std::string& candidate, const std::string& baseline) {
    add_pair(candidate, baseline);
    cpu_pairs_.emplace_back(candidate, baseline);
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    RatioReporter::ReportRuns(runs);
    for (const auto& run : runs)
      if (run.run_type == Run::RT_Iteration && !run.error_occurred)
        cpu_[run.benchmark_name()] = run.GetAdjustedCPUTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
  }
  void print_cpu_ratios() const {
    fmt::print("\nratios of the main thread's CPU time (baseline / candidate, same run; > 1 means faster):\n");
    for (const auto& [cand, base] : cpu_pairs_) {
      const auto c = cpu_.find(cand), b = cpu_.find(base);
      if (c == cpu_.end() || b == cpu_.end() || !(c->second > 0)) continue;
      fmt::print("  {:<60} {:8.2f}x  {}\n", cand, b->second / c->second, base);
    }
  }

 private:
  std::map<std::string, double> cpu_;
  std::vector<std::pair<std::string, std::string>> cpu_pairs_;
};

}  // namespace cqbench
