/// Deferred weight gradients. A weight gradient of a linear map over M tokens is a product
///   dW += dYᵀ·X                      (plain:  linear_backward_weight)
///   dW += sign(W) ⊙ (dYᵀ·X)          (|W|:    abs_linear_backward_weight)
/// of two thin factors, dY [M,N] and X [M,K], much smaller than dW [N,K] when M ≪ N, K. Those
/// two functions take the sink as an argument (null: none) and first offer it the product; a
/// sink that accepts keeps the factors instead of adding the product to dW (see
/// optim/streaming_adamw.hpp, which forms each dW tile by tile inside the optimiser update, so no
/// whole gradient arena is ever resident). Products the sink declines are computed as usual.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/tensor.hpp"

namespace causalqwen::linalg {

/// Receives weight-gradient products: `accept` returns true when it takes over the product
/// dw += [sign(w) ⊙] dyᵀ·x (`w` empty for the plain form), false to have it computed now.
template <class T>
class WeightGradSink {
 public:
  virtual ~WeightGradSink() = default;
  virtual bool accept(TensorView<T, 2> dw, TensorView<const T, 2> dy, TensorView<const T, 2> x,
                      TensorView<const T, 2> w) = 0;
};

/// Told, during a backward pass, how far the gradients are final: final_from(offset) says that no
/// element of the gradient arena at offset ≥ `offset` changes again in this pass. A backward
/// pass runs from the last slots (the heads) to the first (the embeddings), so the offsets told
/// only decrease, ending with 0. Data-parallel training starts summing a finished part over the
/// processes while the backward pass goes on below it.
class GradientProgress {
 public:
  virtual ~GradientProgress() = default;
  virtual void final_from(std::size_t offset) = 0;
};

/// Where a backward pass puts its gradients: the gradient arena (laid out like the parameters),
/// optionally a sink that may take the weight-gradient products as factors instead of adding
/// them to the arena, and optionally a listener told which gradients are final. An arena
/// converts to a target with neither.
template <class T>
struct GradientTarget {
  Arena<T>& arena;
  WeightGradSink<T>* sink = nullptr;
  GradientProgress* progress = nullptr;
  GradientTarget(Arena<T>& gradients, WeightGradSink<T>* factor_sink = nullptr,  // NOLINT: implicit by design
                 GradientProgress* listener = nullptr)
      : arena(gradients), sink(factor_sink), progress(listener) {}

  /// Tells the listener, if any, that gradients at offset ≥ `offset` are final.
  void final_from(std::size_t offset) const {
    if (progress) progress->final_from(offset);
  }
};

/// True when `sink` (may be null) took over dw += [sign(w) ⊙] dyᵀ·x.
template <class T>
bool offer_to_weight_grad_sink(WeightGradSink<T>* sink, TensorView<T, 2> dw, TensorView<const T, 2> dy,
                               TensorView<const T, 2> x, TensorView<const T, 2> w = {}) {
  return sink != nullptr && sink->accept(dw, dy, x, w);
}

}  // namespace causalqwen::linalg
