// Test harness: checks a layer's analytic gradients against central differences.
// The loss is L = Σ R ⊙ out for a fixed random R, so backward is called with dout = R.
#pragma once
#include <causalqwen/autodiff/grad_check.hpp>
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cqtest {

/// A buffer checked by the harness: its values (perturbed in place) and analytic gradient.
struct Checked {
  std::string name;
  std::span<double> value;
  std::span<const double> grad;
};

inline std::vector<double> randn(std::size_t n, std::mt19937_64& rng, double std = 1.0) {
  std::normal_distribution<double> d(0, std);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// grad_check of every buffer; `loss` recomputes L from the current values.
inline void check_gradients(const std::vector<Checked>& buffers, const std::function<double()>& loss,
                            causalqwen::autodiff::GradCheckOptions options = {}) {
  for (const auto& b : buffers) {
    auto r = causalqwen::autodiff::grad_check(b.value, b.grad, loss, options);
    INFO(b.name, ": ", r.message());
    CHECK(r.ok);
  }
}

}  // namespace cqtest
