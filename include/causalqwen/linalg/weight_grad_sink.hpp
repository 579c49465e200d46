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

/// Where a backward pass puts its gradients: the gradient arena (laid out like the parameters)
/// and, optionally, a sink that may take the weight-gradient products as factors instead of
/// adding them to the arena. An arena converts to a target without a sink.
template <class T>
struct GradientTarget {
  Arena<T>& arena;
  WeightGradSink<T>* sink = nullptr;
  GradientTarget(Arena<T>& gradients, WeightGradSink<T>* factor_sink = nullptr)  // NOLINT: implicit by design
      : arena(gradients), sink(factor_sink) {}
};

/// True when `sink` (may be null) took over dw += [sign(w) ⊙] dyᵀ·x.
template <class T>
bool offer_to_weight_grad_sink(WeightGradSink<T>* sink, TensorView<T, 2> dw, TensorView<const T, 2> dy,
                               TensorView<const T, 2> x, TensorView<const T, 2> w = {}) {
  return sink != nullptr && sink->accept(dw, dy, x, w);
}

}  // namespace causalqwen::linalg
