/// The data-parallel gradient sum in buckets, overlapped with the backward pass. Each process
/// owns one range of the parameters (shard_ranges) and needs only the sum over processes of the
/// gradients in that range. While the last micro-batch's backward pass runs, it reports how far
/// the gradients are final (linalg::GradientProgress: every offset ≥ w); as soon as a final
/// stretch not yet sent reaches `bucket_elements`, it becomes a bucket B, and a reduce-scatter of
/// it starts, built from point-to-point messages:
///   every process p sends grads[B ∩ ranges[r]] to each process r ≠ p      (non-blocking)
///   process r receives those pieces into its staging buffer, and when all have arrived
///   owned_grads[B ∩ ranges[r]] ← Σ_{p = 0 … N−1} piece_p                  (in rank order)
/// and the backward pass goes on below it. finish() sends what is left and waits for all.
///
/// Why not MPI_Ireduce_scatter: Open MPI's allocates a temporary buffer of the bucket's size on
/// every call, and the page faults of those buffers can cost more than the copy itself
/// (benchmarks/kernels/bench_gradient_sum.cpp compares the two). The sum in rank order also makes every process's result independent of MPI's
/// choice of algorithm.
///
/// The staging buffer holds (N − 1) · min(owned range, 4 buckets) elements; when a bucket does
/// not fit behind those still in flight, the oldest are completed first. With one process a
/// bucket is a copy.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/dist/communicator.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

namespace causalqwen::dist {

template <class T>
class GradientBuckets final : public linalg::GradientProgress {
 public:
  /// 2^22 elements (16 MiB of float) per bucket by default: about a quarter of a Qwen2.5-0.5B layer.
  GradientBuckets(Communicator comm, std::vector<ElementRange> ranges, std::size_t bucket_elements = std::size_t{1} << 22)
      : comm_(comm), ranges_(std::move(ranges)), bucket_(std::min(bucket_elements, detail_comm::max_piece)) {
    detail::require(ranges_.size() == static_cast<std::size_t>(comm_.size()) && bucket_ > 0, "GradientBuckets",
                    "need one range per process and bucket_elements > 0");
    const std::size_t others = ranges_.size() - 1;
    staging_.resize(others * std::min(mine().size(), staged_buckets * bucket_));  // the lists below keep their capacity too
  }

  /// Starts a step: the gradients are `grads` (the whole arena), the sums of this process's range
  /// go to `owned_grads` (ranges[rank].size() elements). Nothing is final yet.
  void begin(const Arena<T>& grads, std::span<T> owned_grads) {
    detail::require(owned_grads.size() == mine().size() && grads.size() >= ranges_.back().end, "GradientBuckets::begin",
                    "the owned gradients hold {} elements, the range {}", owned_grads.size(), mine().size());
    grads_ = grads.data();
    owned_ = owned_grads.data();
    unsent_end_ = ranges_.back().end;
    sends_.clear(), receives_.clear(), in_flight_.clear();
    oldest_ = 0, staged_end_ = 0;
    seconds_ = 0;
    elements_ = 0;
  }

  /// Every gradient at offset ≥ `offset` is final: starts the buckets that are full.
  void final_from(std::size_t offset) override {
    const auto t0 = clock::now();
    while (unsent_end_ > offset && unsent_end_ - offset >= bucket_) start(unsent_end_ - bucket_);
    // MPI moves messages on only inside its calls: test them, and sum the buckets that arrived
    for (auto& r : sends_) comm_.test(r);
    while (oldest_ < in_flight_.size() && arrived(in_flight_[oldest_])) sum_oldest();
    seconds_ += seconds_since(t0);
  }

  /// Sends what is left and waits until every bucket's sum is in owned_grads.
  void finish() {
    const auto t0 = clock::now();
    while (unsent_end_ > 0) start(unsent_end_ > bucket_ ? unsent_end_ - bucket_ : 0);
    while (oldest_ < in_flight_.size()) sum_oldest();
    for (auto& r : sends_) comm_.wait(r);
    seconds_ += seconds_since(t0);
  }

  /// Seconds spent inside this step's sums (sending, testing, waiting, adding).
  double seconds() const { return seconds_; }
  /// Gradient elements each process sent into the sums this step.
  std::size_t elements() const { return elements_; }
  const std::vector<ElementRange>& ranges() const { return ranges_; }
  ElementRange mine() const { return ranges_[static_cast<std::size_t>(comm_.rank())]; }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }
  static constexpr int tag = 21;
  static constexpr std::size_t staged_buckets = 4;  // buckets' worth of staging per other process

  /// This process's part of a bucket, waiting for the other processes' pieces: they arrive in
  /// staging_[at + k·part.size(), …) for the k-th other process (in rank order), with requests
  /// receives_[first_request + k].
  struct InFlight {
    ElementRange part;
    std::size_t at, first_request;
  };

  /// Starts the sum of the bucket [begin, unsent_end_).
  void start(std::size_t begin) {
    const std::size_t end = unsent_end_;
    unsent_end_ = begin;
    elements_ += end - begin;
    const int me = comm_.rank(), N = comm_.size();
    const ElementRange part = mine().intersect(begin, end - begin);
    if (N == 1) {
      std::copy_n(grads_ + part.begin, part.size(), owned_ + (part.begin - mine().begin));
      return;
    }
    for (int r = 0; r < N; ++r) {
      const ElementRange theirs = ranges_[static_cast<std::size_t>(r)].intersect(begin, end - begin);
      if (r != me && theirs.size() > 0) sends_.push_back(comm_.send_start(grads_ + theirs.begin, theirs.size(), r, tag));
    }
    if (part.size() == 0) return;
    const std::size_t need = static_cast<std::size_t>(N - 1) * part.size();
    if (staged_end_ + need > staging_.size()) {  // the staging buffer is full: finish what is in it
      while (oldest_ < in_flight_.size()) sum_oldest();
      staged_end_ = 0;
    }
    in_flight_.push_back({part, staged_end_, receives_.size()});
    for (int r = 0, k = 0; r < N; ++r)
      if (r != me) receives_.push_back(comm_.receive_start(staging_.data() + staged_end_ + (k++) * part.size(),
                                                            part.size(), r, tag));
    staged_end_ += need;
  }

  /// True when every piece of bucket `b` has arrived (testing moves the messages on).
  bool arrived(const InFlight& b) {
    bool all = true;
    for (int k = 0; k + 1 < comm_.size(); ++k) all = comm_.test(receives_[b.first_request + k]) && all;
    return all;
  }

  /// Waits for the oldest bucket in flight and writes its sum over processes, in rank order.
  void sum_oldest() {
    const InFlight& b = in_flight_[oldest_++];
    const int me = comm_.rank(), N = comm_.size();
    for (int k = 0; k + 1 < N; ++k) comm_.wait(receives_[b.first_request + k]);
    const std::size_t n = b.part.size();
    T* out = owned_ + (b.part.begin - mine().begin);
    const T* own = grads_ + b.part.begin;
    // the pieces in rank order: process r's is `own` for r == me, else the staging slot k
    const auto piece = [&](int r) { return r == me ? own : staging_.data() + b.at + static_cast<std::size_t>(r < me ? r : r - 1) * n; };
    parallel_chunks(n, [&](std::size_t begin, std::size_t end) {
      std::copy(piece(0) + begin, piece(0) + end, out + begin);
      for (int r = 1; r < N; ++r) {
        const T* x = piece(r);
        for (std::size_t i = begin; i < end; ++i) out[i] += x[i];
      }
    });
  }

  Communicator comm_;
  std::vector<ElementRange> ranges_;
  std::size_t bucket_;
  std::vector<T> staging_;
  std::vector<Request> sends_, receives_;
  std::vector<InFlight> in_flight_;
  std::size_t oldest_ = 0, staged_end_ = 0;
  const T* grads_ = nullptr;
  T* owned_ = nullptr;
  std::size_t unsent_end_ = 0, elements_ = 0;
  double seconds_ = 0;
};

}  // namespace causalqwen::dist
