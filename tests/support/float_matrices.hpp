// Random matrices held in vectors, views of them, and the rounding bound of their products, for
// the kernel tests (float and double).
#pragma once
#include <causalqwen/core/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace cqtest {

/// n values drawn from N(0, sd²) in double, stored as T.
template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<double> d(0, sd);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

/// random_vector in float.
inline std::vector<float> normal_vector(std::size_t n, std::mt19937_64& rng, double sd = 1.0) {
  return random_vector<float>(n, rng, sd);
}

/// v as a [r, c] matrix (writable / read-only).
template <class T>
causalqwen::TensorView<T, 2> v2(std::vector<T>& v, std::size_t r, std::size_t c) { return {v.data(), {r, c}}; }
template <class T>
causalqwen::TensorView<const T, 2> c2(const std::vector<T>& v, std::size_t r, std::size_t c) {
  return {v.data(), {r, c}};
}

/// The bound on a k-term sum of products of N(0, 1) entries in T: 8·k·ε·√k (k roundings of
/// √k-sized partial sums).
template <class T>
double sum_tol(std::size_t k) {
  return 8.0 * double(k) * std::numeric_limits<T>::epsilon() * std::sqrt(double(k));
}

}  // namespace cqtest
