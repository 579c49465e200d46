/// SwiGLU MLP: y = down(silu(gate(x)) ⊙ up(x)), no biases (Qwen2).
/// The elementwise middle is one fused expression-template pass each way, in float and double
/// (chunked: each chunk's exponentials at once, through the vector exp in float).
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/nn/linear.hpp"

#include <algorithm>

namespace causalqwen::nn {

template <class T>
struct SwiGLU {
  struct Params {
    typename Linear<T>::Params gate;  // weight [F,H]
    typename Linear<T>::Params up;    // weight [F,H]
    typename Linear<T>::Params down;  // weight [H,F]
  };
  struct Cache {
    TensorView<const T, 2> x;  // [M,H] input (kept alive by the caller)
    TensorView<T, 2> g, u, a;  // [M,F] gate(x), up(x), silu(g)⊙u (storage given by the caller)
  };
  struct Workspace {
    TensorView<T, 2> dg, du, da;  // [M,F] scratch
  };

  /// The elementwise middle: a = silu(g)⊙u, a[i] = g[i] / (1 + e^{−g[i]}) · u[i].
  static void activate(const Cache& c) {
    using namespace autodiff;
    autodiff::eval(c.a, silu(constant(c.g)) * constant(c.u));
  }
  /// Its backward, given da (dg and du accumulate):
  ///   dg[i] += (da[i]·u[i])·σ(1 + g[i](1 − σ)),  du[i] += da[i]·silu(g[i]),  σ = 1/(1 + e^{−g[i]})
  static void activate_backward(const Cache& c, const Workspace& w) {
    using namespace autodiff;
    backprop(silu(var(c.g, w.dg)) * var(c.u, w.du), w.da);
  }

  /// g = x·Wgᵀ, u = x·Wuᵀ, a = silu(g)⊙u, y = a·Wdᵀ
  static void forward(const Params& p, TensorView<const T, 2> x, TensorView<T, 2> y, Cache& c) {
    c.x = x;
    Linear<T>::apply(p.gate, x, c.g);
    Linear<T>::apply(p.up, x, c.u);
    activate(c);
    Linear<T>::apply(p.down, c.a, y);
  }

  /// da = dy·Wd, dWd += dyᵀ·a; (dg, du) from one fused pass over silu(g)⊙u;
  /// dx += dg·Wg + du·Wu; dWg += dgᵀ·x; dWu += duᵀ·x
  static void backward(const Params& p, const Params& grad, const Cache& c, TensorView<const T, 2> dy,
                       TensorView<T, 2> dx, Workspace& w, linalg::WeightGradSink<T>* sink = nullptr) {
    parallel_fill(w.da.data, w.da.size(), T(0));
    parallel_fill(w.dg.data, w.dg.size(), T(0));
    parallel_fill(w.du.data, w.du.size(), T(0));
    linalg::linear_backward_input<T>(w.da, dy, p.down.weight);
    linalg::linear_backward_weight<T>(grad.down.weight.values, dy, c.a, sink, p.down.weight.precision);
    activate_backward(c, w);
    linalg::linear_backward_input<T>(dx, w.dg, p.gate.weight);
    linalg::linear_backward_input<T>(dx, w.du, p.up.weight);
    linalg::linear_backward_weight<T>(grad.gate.weight.values, w.dg, c.x, sink, p.gate.weight.precision);
    linalg::linear_backward_weight<T>(grad.up.weight.values, w.du, c.x, sink, p.up.weight.precision);
  }
};

}  // namespace causalqwen::nn
