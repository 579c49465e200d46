// Layers on the dynamic tape, chained with fused elementwise maps: gradients of every input.
#include "grad_harness.hpp"

#include <causalqwen/nn.hpp>

#include "../support/tape_layers.hpp"

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
namespace ad = causalqwen::autodiff;
using cq::TensorView;
using cqtest::randn;

TEST_CASE("dynamic tape: linear → silu(h)·h → rms_norm → linear → Σ y², then backward()") {
  const std::uint64_t seed = 31;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t M = 6, K = 5, N = 7, O = 3;
  auto w1 = randn(N * K, rng, 0.5), b1 = randn(N, rng), wn = randn(N, rng), w2 = randn(O * N, rng, 0.5);
  std::vector<double> dw1(w1.size()), db1(b1.size()), dwn(wn.size()), dw2(w2.size());
  using W = TensorView<double, 2>;
  nn::Linear<double>::Params p1{W(w1.data(), {N, K}), {b1.data(), {N}}}, g1{W(dw1.data(), {N, K}), {db1.data(), {N}}};
  nn::Linear<double>::Params p2{W(w2.data(), {O, N}), {}}, g2{W(dw2.data(), {O, N}), {}};
  cqtest::Tape<double> tape;
  auto x = tape.variable({M, K}, randn(M * K, rng));
  const auto start = tape.mark();
  auto build = [&] {
    tape.rewind(start);
    auto h = cqtest::tape_linear(tape, p1, g1, x);
    auto a = tape.map([](auto v) { return ad::silu(v) * v; }, h);
    auto n = cqtest::tape_rms_norm(tape, TensorView<double, 1>(wn.data(), {N}), TensorView<double, 1>(dwn.data(), {N}), 1e-6, a);
    auto y = cqtest::tape_linear(tape, p2, g2, n);
    return tape.sum(tape.map([](auto v) { return ad::square(v); }, y));
  };
  auto s = build();
  CHECK(tape.recorded() == 6);
  tape.backward(s);
  std::vector<double> gx = tape.grad(x);
  auto loss = [&] { return tape.value(build())[0]; };
  cqtest::check_gradients({{"x", tape.value(x), gx}, {"W1", w1, dw1}, {"b1", b1, db1}, {"norm weight", wn, dwn}, {"W2", w2, dw2}},
                          loss);
  auto wrong = tape.variable({M, K + 1});
  CHECK_THROWS_WITH_AS(cqtest::tape_linear(tape, p1, g1, wrong), "causalqwen::tape_linear: W [7,5] does not match the input [6,6]",
                       cq::DomainError);
}
