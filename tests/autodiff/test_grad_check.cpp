// grad_check itself: passes a right gradient, fails a wrong one, respects the floor.
#include <causalqwen/autodiff/grad_check.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

namespace ad = causalqwen::autodiff;

TEST_CASE("grad_check accepts a correct gradient and rejects a wrong one") {
  std::vector<double> x = {0.5, -1.5, 2.0};
  auto loss = [&] { return std::sin(x[0]) * x[1] + x[2] * x[2] * x[0]; };
  std::vector<double> good = {std::cos(x[0]) * x[1] + x[2] * x[2], std::sin(x[0]), 2 * x[2] * x[0]};
  auto r = ad::grad_check(std::span<double>(x), std::span<const double>(good), loss);
  CHECK(r.ok);
  CHECK(r.checked == 3);
  CHECK(x[0] == 0.5);  // restored
  std::vector<double> bad = good;
  bad[2] *= 1.001;
  auto rb = ad::grad_check(std::span<double>(x), std::span<const double>(bad), loss);
  CHECK_FALSE(rb.ok);
  CHECK(rb.worst_index == 2);
  CHECK(rb.message().find("FAILED") != std::string::npos);
}

TEST_CASE("grad_check: the floor absorbs round-off on near-zero entries; NaN fails") {
  std::vector<double> x = {1.0};
  auto loss = [&] { return 1e6 + 1e-12 * x[0]; };  // gradient 1e-12, lost in round-off
  std::vector<double> g = {0.0};
  CHECK(ad::grad_check(std::span<double>(x), std::span<const double>(g), loss).ok);
  std::vector<double> nan = {std::nan("")};
  CHECK_FALSE(ad::grad_check(std::span<double>(x), std::span<const double>(nan), loss).ok);
}
