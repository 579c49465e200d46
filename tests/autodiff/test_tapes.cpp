// The dynamic tape (closures), kept in tests/support for gradient checks of composed layers.
#include <causalqwen/autodiff/grad_check.hpp>
#include <doctest/doctest.h>

#include "../support/dynamic_tape.hpp"

#include <cmath>
#include <string>

namespace ad = causalqwen::autodiff;

TEST_CASE("dynamic tape: chained maps, a custom op and sum give the right gradients") {
  cqtest::Tape<double> tape;
  auto x = tape.variable({4}, {0.3, -1.2, 2.0, 0.7});
  auto w = tape.variable({4}, {1.5, 0.5, -0.25, 2.0});
  auto build = [&] {
    auto h = tape.map([](auto a, auto b) { return ad::silu(a) * b; }, x, w);
    // a custom op: cumulative sum, with its hand-written backward
    auto c = tape.custom(
        {4},
        [&](std::vector<double>& out) {
          double s = 0;
          for (std::size_t i = 0; i < 4; ++i) out[i] = (s += tape.value(h)[i]);
        },
        [&tape, h](const std::vector<double>& dout, const std::vector<double>&) {
          double s = 0;
          for (std::size_t i = 4; i-- > 0;) tape.grad(h)[i] += (s += dout[i]);
        });
    auto t = tape.map([](auto a) { return ad::tanh(a); }, c);
    return tape.sum(t);
  };
  auto s = build();
  tape.backward(s);
  std::vector<double> gx = tape.grad(x), gw = tape.grad(w);
  CHECK(tape.recorded() == 4);
  auto loss = [&] {
    tape.clear();
    return tape.value(build())[0];
  };
  auto rx = ad::grad_check(std::span<double>(tape.value(x)), std::span<const double>(gx), loss);
  auto rw = ad::grad_check(std::span<double>(tape.value(w)), std::span<const double>(gw), loss);
  INFO(rx.message(), " / ", rw.message());
  CHECK(rx.ok);
  CHECK(rw.ok);
}

