/// A linear map x ↦ W·x + b held as its weight and bias, and the fusion of two such maps into
/// one: applying (W1, b1) then (W2, b2) equals the one map {W2·W1, W2·b1 + b2}, the exact way to
/// push an independent Cauchy tensor through two maps (a second linear map of the marginal
/// result does not compile; |W2|·|W1|·γ would only bound the true scale |W2·W1|·γ).
///
///   const auto fused = fuse_linear(W2, b2, W1, b1);   // W [M,N], b [M]
///   linear(fused, U, out) (views, operations.hpp), linear(fused, U) (tensors, cauchy_tensor.hpp)
#pragma once
#include <causalqwen/cauchy/operations.hpp>
#include <causalqwen/core/eigen_map.hpp>
#include <causalqwen/core/error.hpp>
#include <causalqwen/core/xt.hpp>

#include <cstddef>

namespace causalqwen {

/// A weight matrix W [M, N] and bias b [M] standing for x ↦ W·x + b.
template <Real T>
struct LinearMap {
  xt::xtensor<T, 2> weight;  // [M, N]
  xt::xtensor<T, 1> bias;    // [M]
};

/// linear(map, X, out) = linear(map.weight, map.bias, X, out) of a view (operations.hpp).
template <Real T, class U, std::size_t R, Kind K>
CauchyView<T, R, Kind::marginal> linear(const LinearMap<T>& map, const CauchyView<U, R, K>& X, CauchyOut<T, R> out) {
  return linear(TensorView<const T, 2>(map.weight), TensorView<const T, 1>(map.bias), X, out);
}

/// fuse_linear(W2, b2, W1, b1) = {W2·W1, W2·b1 + b2}: the one linear map equal to applying
/// (W1, b1) then (W2, b2), so that linear(fused, U) gives the exact scale |W2·W1|·γ.
template <Real T>
LinearMap<T> fuse_linear(const xt::xtensor<T, 2>& W2, const xt::xtensor<T, 1>& b2,
                         const xt::xtensor<T, 2>& W1, const xt::xtensor<T, 1>& b1) {
  const auto M = static_cast<std::ptrdiff_t>(W2.shape(0)), K = static_cast<std::ptrdiff_t>(W2.shape(1));
  const auto N = static_cast<std::ptrdiff_t>(W1.shape(1));
  detail::require(W1.shape(0) == W2.shape(1), "fuse_linear", "W2 has {} columns but W1 has {} rows", W2.shape(1), W1.shape(0));
  detail::require(b1.size() == 0 || b1.size() == W1.shape(0), "fuse_linear", "b1 must have {} entries or none", W1.shape(0));
  detail::require(b2.size() == 0 || b2.size() == W2.shape(0), "fuse_linear", "b2 must have {} entries or none", W2.shape(0));
  LinearMap<T> fused{xt::empty<T>({std::size_t(M), std::size_t(N)}), xt::zeros<T>({std::size_t(M)})};
  mat(fused.weight.data(), M, N).noalias() = mat(W2.data(), M, K) * mat(W1.data(), K, N);
  auto bias = mat(fused.bias.data(), M, 1);
  if (b1.size()) bias.noalias() = mat(W2.data(), M, K) * mat(b1.data(), K, 1);
  if (b2.size()) bias += mat(b2.data(), M, 1);
  return fused;
}

}  // namespace causalqwen
