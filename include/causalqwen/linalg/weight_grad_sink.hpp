/// Deferred weight gradients. A weight gradient of a linear map over M tokens is a product
///   dW += dYᵀ·X                      (plain:  linear_backward_weight)
///   dW += sign(W) ⊙ (dYᵀ·X)          (|W|:    abs_linear_backward_weight)
/// of two thin factors, dY [M,N] and X [M,K], much smaller than dW [N,K] when M ≪ N, K. While a
/// `ScopedWeightGradSink` is active on a thread, those two functions first offer the product to
/// the sink; a sink that accepts it keeps the factors instead of adding the product to dW (see
/// optim/streaming_adamw.hpp, which forms each dW tile by tile inside the optimiser update, so
/// no whole gradient arena is ever resident). Products the sink declines are computed as usual.
#pragma once
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

/// The sink active on this thread (null: none).
template <class T>
WeightGradSink<T>*& active_weight_grad_sink() {
  thread_local WeightGradSink<T>* sink = nullptr;
  return sink;
}

/// Makes `sink` the active one on this thread for the scope's lifetime (restores the previous).
template <class T>
class ScopedWeightGradSink {
 public:
  explicit ScopedWeightGradSink(WeightGradSink<T>& sink) : previous_(active_weight_grad_sink<T>()) {
    active_weight_grad_sink<T>() = &sink;
  }
  ~ScopedWeightGradSink() { active_weight_grad_sink<T>() = previous_; }
  ScopedWeightGradSink(const ScopedWeightGradSink&) = delete;
  ScopedWeightGradSink& operator=(const ScopedWeightGradSink&) = delete;

 private:
  WeightGradSink<T>* previous_;
};

/// True when the active sink took over dw += [sign(w) ⊙] dyᵀ·x.
template <class T>
bool offer_to_weight_grad_sink(TensorView<T, 2> dw, TensorView<const T, 2> dy, TensorView<const T, 2> x,
                               TensorView<const T, 2> w = {}) {
  WeightGradSink<T>* sink = active_weight_grad_sink<T>();
  return sink != nullptr && sink->accept(dw, dy, x, w);
}

}  // namespace causalqwen::linalg
