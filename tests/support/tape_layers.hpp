// Test support, not part of the library.
/// The nn layers as operations of the dynamic tape (`cqtest::Tape`, dynamic_tape.hpp), so tests
/// composed at run time can chain layers with fused elementwise maps and call `backward()`:
///   auto h = cqtest::tape_linear(tape, p1, g1, x);                  // [M,out]
///   auto a = tape.map([](auto v) { return autodiff::silu(v); }, h);
///   auto y = cqtest::tape_rms_norm(tape, w, dw, 1e-6, a);
///   tape.backward(tape.sum(y));        // g1.weight, g1.bias, dw and tape.grad(x) filled
/// Parameters and their gradients are views (e.g. arena slots); gradients accumulate.
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/core/tensor.hpp>
#include <causalqwen/nn/linear.hpp>
#include <causalqwen/nn/rmsnorm.hpp>

#include "dynamic_tape.hpp"

#include <memory>
#include <vector>

namespace cqtest {

namespace detail_tape {
using causalqwen::Shape;
template <class T>
Shape<2> matrix_shape(Tape<T>& tape, TapeVar x, const char* fn) {
  const auto& s = tape.shape(x);
  causalqwen::detail::require(s.size() == 2, fn, "the input must be a [rows, features] matrix, got rank {}", s.size());
  return {s[0], s[1]};
}
}  // namespace detail_tape

/// y = x·Wᵀ + b :  x [M,in] → y [M,out]; backward: dW += dyᵀx, db += colsum(dy), dx += dy·W.
template <class T>
TapeVar tape_linear(Tape<T>& tape, const typename causalqwen::nn::Linear<T>::Params& p,
                    const typename causalqwen::nn::Linear<T>::Params& g, TapeVar x) {
  using Linear = causalqwen::nn::Linear<T>;
  using In = causalqwen::TensorView<const T, 2>;
  using Out = causalqwen::TensorView<T, 2>;
  const auto xs = detail_tape::matrix_shape(tape, x, "tape_linear");
  const std::size_t M = xs[0], K = xs[1], N = p.weight.values.shape[0];
  causalqwen::detail::require(p.weight.values.shape[1] == K, "tape_linear", "W {} does not match the input {}",
                              causalqwen::shape_string(p.weight.values.shape), causalqwen::shape_string(xs));
  return tape.custom(
      {M, N},
      [&](std::vector<T>& out) {
        typename Linear::Cache c;
        Linear::forward(p, In(tape.value(x).data(), xs), Out(out.data(), {M, N}), c);
      },
      [&tape, p, g, x, xs, M, N](const std::vector<T>& dy, const std::vector<T>&) {
        typename Linear::Cache c{In(tape.value(x).data(), xs)};
        Linear::backward(p, g, c, In(dy.data(), {M, N}), Out(tape.grad(x).data(), xs));
      });
}

/// y = w ⊙ x / sqrt(mean(x²) + eps), row by row :  x [M,H] → y [M,H].
template <class T>
TapeVar tape_rms_norm(Tape<T>& tape, causalqwen::TensorView<T, 1> weight, causalqwen::TensorView<T, 1> grad_weight,
                      T eps, TapeVar x) {
  using RMSNorm = causalqwen::nn::RMSNorm<T>;
  using In = causalqwen::TensorView<const T, 2>;
  using Out = causalqwen::TensorView<T, 2>;
  using Vector = causalqwen::TensorView<T, 1>;
  const auto xs = detail_tape::matrix_shape(tape, x, "tape_rms_norm");
  auto inv_rms = std::make_shared<std::vector<T>>(xs[0]);
  return tape.custom(
      {xs[0], xs[1]},
      [&](std::vector<T>& out) {
        typename RMSNorm::Cache c;
        c.inv_rms = Vector(inv_rms->data(), {xs[0]});
        RMSNorm::forward({weight}, eps, In(tape.value(x).data(), xs), Out(out.data(), xs), c);
      },
      [&tape, weight, grad_weight, x, xs, inv_rms](const std::vector<T>& dy, const std::vector<T>&) {
        typename RMSNorm::Cache c{In(tape.value(x).data(), xs), Vector(inv_rms->data(), {xs[0]})};
        RMSNorm::backward({weight}, {grad_weight}, c, In(dy.data(), xs), Out(tape.grad(x).data(), xs));
      });
}

}  // namespace cqtest
