// The dynamic tape (closures) and the static tape (compile-time fold).
#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/autodiff/static_tape.hpp>
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

namespace {
struct Log {
  std::string text;
  double value = 1, grad = 0;
};
template <int K>
struct ScaleStage {  // value *= K ; backward: grad *= K
  void forward(Log& c) {
    c.text += 'f';
    c.text += std::to_string(K);
    c.value *= K;
  }
  void backward(Log& c) {
    c.text += 'b';
    c.text += std::to_string(K);
    c.grad *= K;
  }
};
}  // namespace

TEST_CASE("static tape: forward folds left, backward folds right") {
  ad::StaticTape<ScaleStage<2>, ScaleStage<3>, ScaleStage<5>> tape;
  static_assert(decltype(tape)::size() == 3);
  Log log;
  tape.forward(log);
  log.grad = 1;
  tape.backward(log);
  CHECK(log.text == "f2f3f5b5b3b2");
  CHECK(log.value == 30);
  CHECK(log.grad == 30);
}
