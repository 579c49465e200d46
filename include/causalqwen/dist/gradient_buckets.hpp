/// The data-parallel gradient sum in buckets, overlapped with the backward pass. Each process
/// owns one range of the parameters (shard_ranges) and needs only the sum over processes of the
/// gradients in that range. While the last micro-batch's backward pass runs, it reports how far
/// the gradients are final (linalg::GradientProgress: every offset ≥ w); as soon as a final
/// stretch not yet sent reaches `bucket_elements`, a non-blocking reduce-scatter of it starts
///   owned_grads[part of bucket ∩ owned] ← Σ_processes grads[bucket ∩ owned]
/// and the backward pass goes on below it. finish() sends what is left and waits for all.
/// With one process a bucket is a copy.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/dist/communicator.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"

#include <chrono>
#include <span>
#include <vector>

namespace causalqwen::dist {

template <class T>
class GradientBuckets final : public linalg::GradientProgress {
 public:
  /// 2^22 elements (16 MiB of float) per bucket by default: about a quarter of a Qwen2.5-0.5B layer.
  GradientBuckets(Communicator comm, std::vector<ElementRange> ranges, std::size_t bucket_elements = std::size_t{1} << 22)
      : comm_(comm), ranges_(std::move(ranges)), bucket_(std::min(bucket_elements, detail_comm::max_piece)),
        counts_(ranges_.size()) {
    detail::require(ranges_.size() == static_cast<std::size_t>(comm_.size()) && bucket_ > 0, "GradientBuckets",
                    "need one range per process and bucket_elements > 0");
  }

  /// Starts a step: the gradients are `grads` (the whole arena), the sums of this process's range
  /// go to `owned_grads` (ranges[rank].size() elements). Nothing is final yet.
  void begin(const Arena<T>& grads, std::span<T> owned_grads) {
    detail::require(owned_grads.size() == mine().size() && grads.size() >= ranges_.back().end, "GradientBuckets::begin",
                    "the owned gradients hold {} elements, the range {}", owned_grads.size(), mine().size());
    grads_ = grads.data();
    owned_ = owned_grads.data();
    unsent_end_ = ranges_.back().end;
    requests_.clear();
    seconds_ = 0;
    elements_ = 0;
  }

  /// Every gradient at offset ≥ `offset` is final: starts the buckets that are full.
  void final_from(std::size_t offset) override {
    const auto t0 = clock::now();
    while (unsent_end_ > offset && unsent_end_ - offset >= bucket_) start(unsent_end_ - bucket_);
    for (auto& r : requests_) comm_.test(r);  // MPI advances started collectives only inside its calls
    seconds_ += seconds_since(t0);
  }

  /// Sends what is left and waits until every bucket's sum is in owned_grads.
  void finish() {
    const auto t0 = clock::now();
    while (unsent_end_ > 0) start(unsent_end_ > bucket_ ? unsent_end_ - bucket_ : 0);
    for (auto& r : requests_) comm_.wait(r);
    seconds_ += seconds_since(t0);
  }

  /// Seconds spent inside the collectives' calls this step (starting, testing, waiting).
  double seconds() const { return seconds_; }
  /// Gradient elements each process sent into the sums this step.
  std::size_t elements() const { return elements_; }
  const std::vector<ElementRange>& ranges() const { return ranges_; }
  ElementRange mine() const { return ranges_[static_cast<std::size_t>(comm_.rank())]; }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

  /// Starts the reduce-scatter of [begin, unsent_end_).
  void start(std::size_t begin) {
    const std::size_t end = unsent_end_;
    for (std::size_t r = 0; r < ranges_.size(); ++r)
      counts_[r] = static_cast<int>(ranges_[r].intersect(begin, end - begin).size());
    const ElementRange part = mine().intersect(begin, end - begin);
    T* out = owned_ + (part.size() ? part.begin - mine().begin : 0);
    requests_.push_back(comm_.reduce_scatter_start(grads_ + begin, out, counts_));
    elements_ += end - begin;
    unsent_end_ = begin;
  }

  Communicator comm_;
  std::vector<ElementRange> ranges_;
  std::size_t bucket_;
  std::vector<int> counts_;
  std::vector<Request> requests_;
  const T* grads_ = nullptr;
  T* owned_ = nullptr;
  std::size_t unsent_end_ = 0, elements_ = 0;
  double seconds_ = 0;
};

}  // namespace causalqwen::dist
