/// Linear: y = x·Wᵀ + b  (W [out,in], b [out] optional). For inference, W may also have a packed
/// bf16 / int8 copy, which decoding steps of a few rows read instead (linalg/packed_weight.hpp).
/// In mixed-precision training (precision bf16) its three products round their operands to
/// bf16 and sum in float (linalg/bf16_gemm.hpp); W, b and their gradients stay float.
#pragma once
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/gemm.hpp"

namespace causalqwen::nn {

template <class T>
struct Linear {
  /// The same struct holds parameters and their gradients (slices of two arenas).
  struct Params {
    TensorView<T, 2> weight{};  // [out,in]
    TensorView<T, 1> bias{};    // [out], empty when the layer has no bias
    linalg::PackedRef packed{};  // a bf16 / int8 copy of W (inference's, or bf16 training's; f32: none)
    linalg::Precision precision = linalg::Precision::f32;  // bf16: mixed-precision products
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
    linalg::linear_forward<T>(y, x, p.weight, p.bias, p.packed, p.precision);
  }
  /// dW += dyᵀ·x (offered to `sink` first), db += colsum(dy), dx += dy·W (dx may be empty:
  /// not needed)
  static void backward(const Params& p, const Params& g, const Cache& c, TensorView<const T, 2> dy,
                       TensorView<T, 2> dx, linalg::WeightGradSink<T>* sink = nullptr) {
    linalg::linear_backward_weight<T>(g.weight, dy, c.x, sink, p.precision);
    if (!g.bias.empty()) linalg::bias_backward<T>(g.bias, dy);
    if (!dx.empty()) linalg::linear_backward_input<T>(dx, dy, p.weight, p.precision, p.packed);
  }
};

}  // namespace causalqwen::nn
