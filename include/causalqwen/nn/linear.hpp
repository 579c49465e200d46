/// Linear: y = x·Wᵀ + b  (W [out,in], b [out] optional). W is a linalg::Weight: for inference it
/// may carry a packed bf16 / int8 copy, which decoding steps of a few rows read instead
/// (linalg/packed_weight.hpp); in mixed-precision training (its precision bf16) the three
/// products round their operands to bf16 and sum in float (linalg/bf16_gemm.hpp), reading its
/// bf16 copy when it has one; W, b and their gradients stay float.
#pragma once
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/weight.hpp"

namespace causalqwen::nn {

template <class T>
struct Linear {
  /// The same struct holds parameters and their gradients (slices of two arenas).
  struct Params {
    linalg::Weight<T> weight{};  // [out,in], with its forms (a gradient's: none)
    TensorView<T, 1> bias{};     // [out], empty when the layer has no bias
  };
  struct Cache {
    TensorView<const T, 2> x;  // [M,in] the input (kept alive by the caller)
  };

  /// y = x·Wᵀ + b :  x [M,in] → y [M,out]
  static void forward(const Params& p, TensorView<const T, 2> x, TensorView<T, 2> y, Cache& c) {
    apply(p, x, y);
    c.x = x;
  }
  /// y = x·Wᵀ + b, nothing kept (W from its packed copy when it has one and x has few rows).
  static void apply(const Params& p, TensorView<const T, 2> x, TensorView<T, 2> y) {
    linalg::linear_forward<T>(y, x, p.weight, p.bias);
  }
  /// dW += dyᵀ·x (offered to `sink` first), db += colsum(dy), dx += dy·W (dx may be empty:
  /// not needed)
  static void backward(const Params& p, const Params& g, const Cache& c, TensorView<const T, 2> dy,
                       TensorView<T, 2> dx, linalg::WeightGradSink<T>* sink = nullptr) {
    linalg::linear_backward_weight<T>(g.weight.values, dy, c.x, sink, p.weight.precision);
    if (!g.bias.empty()) linalg::bias_backward<T>(g.bias, dy);
    if (!dx.empty()) linalg::linear_backward_input<T>(dx, dy, p.weight);
  }
};

}  // namespace causalqwen::nn
