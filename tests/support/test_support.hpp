// Shared helpers for the doctest suites: tolerances in ulps or relative-with-floor, seeds that
// are printed (and can be replayed with CAUSALQWEN_TEST_SEED=...), central differences.
#pragma once
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

namespace cqtest {

/// |actual − expected| ≤ n·ε_T·|expected| + floor (floor defaults to T's smallest normal).
/// Infinities must match exactly; NaN matches only NaN.
template <class T, class R>
bool close_ulps(T actual, R expected, double n_ulps,
                double floor = static_cast<double>(std::numeric_limits<T>::min())) {
  const long double a = actual, e = static_cast<long double>(expected);
  if (std::isnan(e)) return std::isnan(a);
  if (std::isinf(e) || std::isinf(a)) return a == e;
  const long double eps = std::numeric_limits<T>::epsilon();
  return std::fabs(a - e) <= n_ulps * eps * std::fabs(e) + floor;
}

/// |actual − expected| ≤ rel·max(|expected|, scale_floor).
inline bool close_rel(double actual, double expected, double rel, double scale_floor = 1.0) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  return std::fabs(actual - expected) <= rel * std::fmax(std::fabs(expected), scale_floor);
}

/// The seed of a random test: CAUSALQWEN_TEST_SEED if set, else `fallback`; always printed.
inline std::uint64_t test_seed(std::uint64_t fallback, const char* test_name) {
  std::uint64_t seed = fallback;
  if (const char* env = std::getenv("CAUSALQWEN_TEST_SEED")) seed = std::strtoull(env, nullptr, 10);
  fmt::print("[seed] {}: {} (replay with CAUSALQWEN_TEST_SEED={})\n", test_name, seed, seed);
  return seed;
}

/// The what() of the exception of type E that f() throws, or "no exception".
template <class E, class F>
std::string error_message(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no exception";
}

/// Central difference (f(x + h) − f(x − h)) / 2h in double with h = step·max(1, |x|).
template <class F>
double central_difference(F f, double x, double step = 1e-6) {
  const double h = step * std::fmax(1.0, std::fabs(x));
  return (f(x + h) - f(x - h)) / (2.0 * h);
}

}  // namespace cqtest
