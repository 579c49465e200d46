// The data-parallel gradient sum and parameter all-gather of one training step, on a gradient
// arena of E float elements split over the processes of `mpirun -np N` (2 on this machine):
//   reduce-scatter in buckets of 2^22 elements, all started, then all waited for:
//     baseline  MPI_Ireduce_scatter per bucket (what the trainer first used)
//     ours      dist::GradientBuckets (point-to-point messages into a kept staging buffer,
//               added in rank order)
//   all-gather of the updated parameters:
//     baseline  MPI_Bcast of each process's range
//     ours      Communicator::all_gather_ranges (one in-place MPI_Allgatherv)
// Prints seconds (the slowest process, median of the repetitions), minor page faults (all
// processes, summed over repetitions) and ours / baseline. Both sums are checked against the
// exact answer (small integers). Run:
//   mpirun -np 2 build/bin/bench_gradient_sum [ELEMENTS (default 2^28: 1 GiB)] [REPETITIONS (3)]
#include "common/thread_settings.hpp"
#include <causalqwen/dist/communicator.hpp>
#include <causalqwen/dist/gradient_buckets.hpp>

#include <unistd.h>

#include <fmt/format.h>
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <vector>

namespace cq = causalqwen;

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Measured {
  double seconds = 0;  // the slowest process's, median over repetitions
  long faults = 0;     // every process, every repetition
};

/// Runs `body` `reps` times between barriers.
Measured measure(const cq::dist::Communicator& comm, int reps, const std::function<void()>& body) {
  std::vector<double> times;
  long faults = 0;
  for (int k = 0; k < reps; ++k) {
    comm.barrier();
    const long f0 = minor_faults();
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(slowest);
    faults += static_cast<long>(comm.sum(static_cast<double>(minor_faults() - f0)));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], faults};
}

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  cq::dist::Session mpi(&argc, &argv, cq::dist::started_by_mpirun(environ));
  const auto comm = cq::dist::Communicator::world();
  const std::size_t elements = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{1} << 28;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::size_t bucket = std::size_t{1} << 22;
  const int N = comm.size(), me = comm.rank();
  if (N < 2) {
    fmt::print("run it under mpirun -np 2 (or more): one process has nothing to sum\n");
    return 1;
  }
  const auto ranges = cq::shard_ranges(elements, static_cast<std::size_t>(N));
  const auto mine = ranges[static_cast<std::size_t>(me)];
  auto layout = std::make_shared<cq::Layout>();
  layout->add("g", {elements});
  cq::Arena<float> grads(layout), params(layout);
  for (std::size_t i = 0; i < elements; ++i) grads.data()[i] = static_cast<float>((i % 1000) + static_cast<std::size_t>(me));
  std::vector<float> owned(mine.size());
  // the exact sum of element i over processes: N·(i mod 1000) + 0 + 1 + … + N−1
  const auto check_sum = [&](const char* what) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < owned.size(); ++i)
      wrong += owned[i] != static_cast<float>(N * ((mine.begin + i) % 1000) + N * (N - 1) / 2);
    if (wrong) fmt::print("process {}: {} wrong sums from {}\n", me, wrong, what);
    std::fill(owned.begin(), owned.end(), 0.0f);
  };

  std::vector<int> counts(static_cast<std::size_t>(N));
  std::vector<MPI_Request> requests;
  const auto baseline_sum = measure(comm, reps, [&] {
    requests.clear();
    for (std::size_t end = elements; end > 0;) {
      const std::size_t begin = end > bucket ? end - bucket : 0;
      for (int r = 0; r < N; ++r) counts[static_cast<std::size_t>(r)] = static_cast<int>(ranges[static_cast<std::size_t>(r)].intersect(begin, end - begin).size());
      const auto part = mine.intersect(begin, end - begin);
      MPI_Request req;
      MPI_Ireduce_scatter(grads.data() + begin, owned.data() + (part.size() ? part.begin - mine.begin : 0), counts.data(),
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      requests.push_back(req);
      end = begin;
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  });
  check_sum("MPI_Ireduce_scatter");
  cq::dist::GradientBuckets<float> buckets(comm, ranges, bucket);
  const auto our_sum = measure(comm, reps, [&] {
    buckets.begin(grads, owned);
    buckets.finish();
  });
  check_sum("GradientBuckets");

  const auto baseline_gather = measure(comm, reps, [&] {
    for (int r = 0; r < N; ++r)
      comm.broadcast(std::span<float>(params.data() + ranges[static_cast<std::size_t>(r)].begin, ranges[static_cast<std::size_t>(r)].size()), r);
  });
  const auto our_gather = measure(comm, reps, [&] { comm.all_gather_ranges(params.data(), std::span<const cq::ElementRange>(ranges)); });

  if (comm.is_root()) {
    fmt::print("{} processes, {} float elements ({:.2f} GiB), buckets of 2^22, median of {}:\n", N, elements,
               static_cast<double>(elements) * 4 / (1 << 30), reps);
    const auto row = [](const char* what, const Measured& m) {
      fmt::print("  {:<52} {:8.3f} s  {:>9} minor faults\n", what, m.seconds, m.faults);
    };
    row("reduce-scatter, baseline MPI_Ireduce_scatter", baseline_sum);
    row("reduce-scatter, ours (GradientBuckets)", our_sum);
    fmt::print("  reduce-scatter: ours {:.1f}x faster\n", baseline_sum.seconds / our_sum.seconds);
    row("all-gather, baseline MPI_Bcast per process", baseline_gather);
    row("all-gather, ours (all_gather_ranges: MPI_Allgatherv)", our_gather);
    fmt::print("  all-gather: ours {:.1f}x faster\n", baseline_gather.seconds / our_gather.seconds);
  }
  return 0;
}
