// optim/sgd.hpp: SGD against torch.optim.SGD (tests/reference/sgd_reference.py, written into the
// build tree by the ctest fixture optim_sgd_reference) with and without momentum and coupled
// weight decay, in float and double; a hand computation; decay and freezing rules; arguments.
//
// Tolerances:
//   double: 4 ulps relative to max(|θ|, 1) after each of 5 steps — both sides compute
//           g + wd·θ, μ·buf + g and θ − lr·buf in float64 with the same operation order; the
//           slack only covers a fused multiply-add on either side.
//   float:  ours computes each step in double and rounds to float once per stored value (θ and
//           buf), torch rounds after every float32 operation (≤ 3 per element per step); over 5
//           steps that is ≤ ~15 half-ulps of drift, so 16·2⁻²⁴ relative to max(|θ|, 1). The float
//           run is also held to the float64 reference at the same bound.
#include <causalqwen/optim.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/parameter_rules.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "../support/frozen_backbone.hpp"
#include "../support/test_support.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace co = causalqwen::optim;
using cqtest::close_rel;
using cqtest::test_seed;

namespace {

/// The fixture's JSON (see tests/reference/sgd_reference.py), read once.
const nlohmann::json& sgd_reference() {
  static const nlohmann::json reference = [] {
    const std::string path = std::string(CQ_SGD_REFERENCE_DIR) + "/sgd_reference.json";
    std::ifstream in(path);
    if (!in) FAIL("cannot open " << path << " (the ctest fixture optim_sgd_reference writes it)");
    auto parsed = nlohmann::json::parse(in);
    fmt::print("[seed] sgd reference: {} (fixed in tests/reference/sgd_reference.py; torch {})\n",
               parsed["seed"].get<std::uint64_t>(), parsed["torch"].get<std::string>());
    return parsed;
  }();
  return reference;
}

/// A layout of one decayed slot "w" of n elements.
std::shared_ptr<cq::Layout> vector_layout(std::size_t n) {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("w", {n});
  return layout;
}

/// Runs every reference case in T and compares θ and the momentum buffer after each step with
/// torch's run in `torch_dtype` ("float32" or "float64") at relative tolerance `rel`.
template <class T>
void check_against_torch(const char* torch_dtype, double rel) {
  const auto& reference = sgd_reference();
  const double lr = reference["lr"].get<double>();
  const auto size = reference["size"].get<std::size_t>();
  const auto steps = reference["steps"].get<std::size_t>();
  REQUIRE(reference["cases"].size() == 4);
  for (const auto& c : reference["cases"]) {
    const auto name = c["name"].get<std::string>();
    const co::SgdConfig config{c["momentum"].get<double>(), c["weight_decay"].get<double>()};
    auto layout = vector_layout(size);
    cq::Arena<T> params(layout), grads(layout);
    const auto initial = c["initial"].get<std::vector<double>>();
    for (std::size_t i = 0; i < size; ++i) params.data()[i] = static_cast<T>(initial[i]);
    co::Sgd<T> sgd(layout, config);
    for (std::size_t step = 0; step < steps; ++step) {
      const auto g = c["grads"][step].get<std::vector<double>>();
      for (std::size_t i = 0; i < size; ++i) grads.data()[i] = static_cast<T>(g[i]);
      sgd.step(params, grads, lr);
      const auto torch_params = c[torch_dtype]["params"][step].get<std::vector<double>>();
      const auto torch_buffer = c[torch_dtype]["buffer"][step].get<std::vector<double>>();
      CHECK(torch_buffer.size() == (config.momentum > 0 ? size : 0));
      for (std::size_t i = 0; i < size; ++i) {
        CHECK_MESSAGE(close_rel(params.data()[i], torch_params[i], rel),
                      name << " step " << step + 1 << " element " << i << ": " << params.data()[i] << " vs torch "
                           << torch_params[i]);
        if (config.momentum > 0)
          CHECK_MESSAGE(close_rel(sgd.momentum_buffer().data()[i], torch_buffer[i], rel),
                        name << " buffer, step " << step + 1 << " element " << i);
        else
          CHECK(sgd.momentum_buffer().data()[i] == T(0));
      }
    }
    CHECK(sgd.steps() == steps);
  }
}

}  // namespace

TEST_CASE("SGD matches torch.optim.SGD in float64 (plain, momentum, decay, both)") {
  check_against_torch<double>("float64", 4 * std::numeric_limits<double>::epsilon());
}

TEST_CASE("SGD in float matches torch.optim.SGD in float32 and in float64") {
  const double rel = 16 * std::numeric_limits<float>::epsilon() / 2;
  check_against_torch<float>("float32", rel);
  check_against_torch<float>("float64", rel);
}

TEST_CASE_TEMPLATE("SGD by hand: two steps with momentum and decay", T, float, double) {
  auto layout = vector_layout(1);
  cq::Arena<T> params(layout), grads(layout);
  params.data()[0] = T(2);
  grads.data()[0] = T(0.5);
  co::Sgd<T> sgd(layout, {0.5, 0.25});
  const auto version = params.version();
  sgd.step(params, grads, 0.1);
  // g = 0.5 + 0.25·2 = 1; buf = 1; θ = 2 − 0.1·1 = 1.9
  CHECK(sgd.momentum_buffer().data()[0] == T(1));
  CHECK(params.data()[0] == doctest::Approx(1.9).epsilon(4 * std::numeric_limits<T>::epsilon()));
  CHECK(params.version() == version + 1);
  sgd.step(params, grads, 0.1);
  // g = 0.5 + 0.25·1.9 = 0.975; buf = 0.5·1 + 0.975 = 1.475; θ = 1.9 − 0.1475 = 1.7525
  CHECK(sgd.momentum_buffer().data()[0] == doctest::Approx(1.475).epsilon(4 * std::numeric_limits<T>::epsilon()));
  CHECK(params.data()[0] == doctest::Approx(1.7525).epsilon(4 * std::numeric_limits<T>::epsilon()));
}

TEST_CASE("SGD: no weight decay on a no-decay slot; the step is proportional to the gradient") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a.weight", {3});
  layout->add("a.bias", {3});
  cq::Arena<double> params(layout), grads(layout);
  for (auto& v : params.span()) v = 2.0;
  co::Sgd<double> sgd(layout, {0.0, 0.5}, cq::model::parameter_rules(*layout));  // the model's rules: no decay on biases
  sgd.step(params, grads, 0.1);  // zero gradient: only the decay acts
  for (double v : params.slot_span("a.bias")) CHECK(v == 2.0);
  for (double v : params.slot_span("a.weight")) CHECK(v == doctest::Approx(2.0 - 0.1 * 0.5 * 2.0).epsilon(1e-15));
  // without decay, scaling the gradient by s scales the step by s (what AdamW does not do)
  co::Sgd<double> plain(layout);
  for (auto& v : params.span()) v = 0.0;
  auto bias_grad = grads.slot_span("a.bias");
  auto weight_grad = grads.slot_span("a.weight");
  for (std::size_t i = 0; i < 3; ++i) bias_grad[i] = 1.0, weight_grad[i] = 0.01;
  plain.step(params, grads, 0.1);
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(params.slot_span("a.weight")[i] == doctest::Approx(0.01 * params.slot_span("a.bias")[i]).epsilon(1e-15));
}

TEST_CASE_TEMPLATE("SGD leaves frozen slots and their momentum bit-identical", T, float, double) {
  const auto seed = test_seed(13, "sgd freeze");
  constexpr cq::model::StaticConfig tiny{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_layers = 1, .num_heads = 2,
      .num_kv_heads = 1, .causal_size = 8, .num_classes = 15, .num_token_id = 14};
  cq::model::CausalQwen<T, tiny> model;
  model.init_random(seed);
  const auto before = std::vector<T>(model.params().span().begin(), model.params().span().end());
  auto grads = model.make_gradients();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (auto& v : grads.span()) v = static_cast<T>(normal(rng));
  const auto rules = cq::model::parameter_rules(model.layout(), {.freeze = cq::model::Freeze::backbone});
  co::Sgd<T> sgd(model.params().shared_layout(), {0.9, 0.01}, rules);
  for (int s = 0; s < 3; ++s) sgd.step(model.params(), grads, 0.05);
  const std::size_t changed_causal = cqtest::require_only_heads_changed(model.params(), before, sgd.momentum_buffer());
  CHECK(changed_causal > 100);
}

TEST_CASE("SGD checks its arguments") {
  auto layout = vector_layout(3);
  auto other = vector_layout(4);
  CHECK(cqtest::error_message<cq::DomainError>([&] { co::Sgd<double>(layout, {1.0, 0.0}); }) ==
        "causalqwen::Sgd: momentum must lie in [0, 1), got 1");
  CHECK(cqtest::error_message<cq::DomainError>([&] { co::Sgd<double>(layout, {0.0, -1.0}); }) ==
        "causalqwen::Sgd: need weight_decay >= 0, got -1");
  co::Sgd<double> sgd(layout);
  cq::Arena<double> params(layout), wrong(other);
  CHECK(cqtest::error_message<cq::DomainError>([&] { sgd.step(params, wrong, 0.1); }) ==
        "causalqwen::Sgd::step: parameter, gradient and momentum arenas must share one layout (3 / 4 / 3 elements)");
  CHECK(cqtest::error_message<cq::DomainError>([&] { sgd.step(params, params, -0.1); }) ==
        "causalqwen::Sgd::step: need a finite lr >= 0, got -0.1");
  CHECK(sgd.steps() == 0);
}
