/// The nn layers as operations of the dynamic tape (`autodiff::Tape`), so experiments composed
/// at run time can chain layers with fused elementwise maps and call `backward()`:
///   auto h = nn::linear(tape, p1, g1, x);                           // [M,out]
///   auto a = tape.map([](auto v) { return autodiff::silu(v); }, h);
///   auto y = nn::rms_norm(tape, w, dw, 1e-6, a);
///   tape.backward(tape.sum(y));        // g1.weight, g1.bias, dw and tape.grad(x) filled
/// Parameters and their gradients are views (e.g. arena slots); gradients accumulate.
#pragma once
#include "causalqwen/autodiff/tape.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/nn/linear.hpp"
#include "causalqwen/nn/rmsnorm.hpp"

#include <memory>
#include <vector>

namespace causalqwen::nn {

namespace detail_tape {
template <class T>
Shape<2> matrix_shape(autodiff::Tape<T>& tape, autodiff::TapeVar x, const char* fn) {
  const auto& s = tape.shape(x);
  detail::require(s.size() == 2, fn, "the input must be a [rows, features] matrix, got rank {}", s.size());
  return {s[0], s[1]};
}
}  // namespace detail_tape

/// y = x·Wᵀ + b :  x [M,in] → y [M,out]; backward: dW += dyᵀx, db += colsum(dy), dx += dy·W.
template <class T>
autodiff::TapeVar linear(autodiff::Tape<T>& tape, const typename Linear<T>::Params& p,
                         const typename Linear<T>::Params& g, autodiff::TapeVar x) {
  const auto xs = detail_tape::matrix_shape(tape, x, "nn::linear");
  const std::size_t M = xs[0], K = xs[1], N = p.weight.shape[0];
  detail::require(p.weight.shape[1] == K, "nn::linear", "W {} does not match the input {}",
                  shape_string(p.weight.shape), shape_string(xs));
  return tape.custom(
      {M, N},
      [&](std::vector<T>& out) {
        typename Linear<T>::Cache c;
        Linear<T>::forward(p, TensorView<const T, 2>(tape.value(x).data(), xs), TensorView<T, 2>(out.data(), {M, N}), c);
      },
      [&tape, p, g, x, xs, M, N](const std::vector<T>& dy, const std::vector<T>&) {
        typename Linear<T>::Cache c{TensorView<const T, 2>(tape.value(x).data(), xs)};
        Linear<T>::backward(p, g, c, TensorView<const T, 2>(dy.data(), {M, N}), TensorView<T, 2>(tape.grad(x).data(), xs));
      });
}

/// y = w ⊙ x / sqrt(mean(x²) + eps), row by row :  x [M,H] → y [M,H].
template <class T>
autodiff::TapeVar rms_norm(autodiff::Tape<T>& tape, TensorView<T, 1> weight, TensorView<T, 1> grad_weight, T eps,
                           autodiff::TapeVar x) {
  const auto xs = detail_tape::matrix_shape(tape, x, "nn::rms_norm");
  auto inv_rms = std::make_shared<std::vector<T>>(xs[0]);
  return tape.custom(
      {xs[0], xs[1]},
      [&](std::vector<T>& out) {
        typename RMSNorm<T>::Cache c;
        c.inv_rms = TensorView<T, 1>(inv_rms->data(), {xs[0]});
        RMSNorm<T>::forward({weight}, eps, TensorView<const T, 2>(tape.value(x).data(), xs), TensorView<T, 2>(out.data(), xs), c);
      },
      [&tape, weight, grad_weight, x, xs, inv_rms](const std::vector<T>& dy, const std::vector<T>&) {
        typename RMSNorm<T>::Cache c{TensorView<const T, 2>(tape.value(x).data(), xs), TensorView<T, 1>(inv_rms->data(), {xs[0]})};
        RMSNorm<T>::backward({weight}, {grad_weight}, c, TensorView<const T, 2>(dy.data(), xs),
                             TensorView<T, 2>(tape.grad(x).data(), xs));
      });
}

}  // namespace causalqwen::nn
