// Random float matrices held in vectors, and views of them, for the kernel tests.
#pragma once
#include <causalqwen/core/tensor.hpp>

#include <cstddef>
#include <random>
#include <vector>

namespace cqtest {

/// n values drawn from N(0, sd²) in double, stored as float.
inline std::vector<float> normal_vector(std::size_t n, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<double> d(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

/// v as a [r, c] matrix (writable / read-only).
inline causalqwen::TensorView<float, 2> v2(std::vector<float>& v, std::size_t r, std::size_t c) { return {v.data(), {r, c}}; }
inline causalqwen::TensorView<const float, 2> c2(const std::vector<float>& v, std::size_t r, std::size_t c) {
  return {v.data(), {r, c}};
}

}  // namespace cqtest
