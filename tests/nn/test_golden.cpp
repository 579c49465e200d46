// Golden check against the PyTorch reference (tests/reference/qwen2_reference.py, which follows
// Hugging Face's Qwen2 eager attention): forward z at every non-padded position and the
// gradient of L = Σ_valid R·z with respect to every parameter and to the numeric values.
//
// Error measure, per tensor r (the float64 reference) and candidate a:
//   err = max_i |a_i − r_i| / max(|r_i|, rms(r))
// (relative, with the tensor's rms as the floor, so entries that cancel to ~0 are judged on the
// tensor's scale).
// Tolerances:
//   double: 1e-10 — both sides compute in float64; ~20 chained reductions of ≤ 48 terms give
//           worst-case bounds of ~20·48·2⁻⁵³ ≈ 1e-13 before conditioning; 1e-10 leaves 1000×.
//   float:  z 2e-5 and gradients 1e-4. Derivation: unit round-off u = 2⁻²⁴ ≈ 6e-8; the
//           forward chain has ~7 reductions per layer (RMS, q/k/v, QKᵀ, softmax, PV, o_proj,
//           RMS, gate/up, down) × 2 layers + the final RMS ≈ 15, each of length K ≤ 48 with
//           rounding errors that add like √K: 15·√48·u ≈ 6e-6, ×~3 for the final norm's and
//           softmax's conditioning → 2e-5. Backward doubles the chain and sums over B·S = 14
//           tokens (√14): 2·√14·6e-6·~2 ≈ 1e-4. The same test asserts that PyTorch's own float32
//           run meets these tolerances, so they are float32-tight, not arbitrary.
#include "../support/qwen2_stack.hpp"
#include <causalqwen/nn.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
using cq::TensorView;

namespace {
struct Golden {
  nlohmann::json index;
  std::vector<double> data;
  std::vector<double> get(const std::string& name) const {
    REQUIRE_MESSAGE(index["tensors"].contains(name), "golden file lacks " << name);
    const auto& e = index["tensors"][name];
    std::size_t n = 1;
    for (auto d : e["shape"]) n *= d.get<std::size_t>();
    const auto off = e["offset"].get<std::size_t>();
    return {data.begin() + off, data.begin() + off + n};
  }
};

const Golden& golden() {
  static Golden g = [] {
    Golden out;
    const std::string dir = CQ_GOLDEN_DIR;
    std::ifstream idx(dir + "/golden.json");
    if (!idx) FAIL("cannot open " << dir << "/golden.json (the ctest fixture nn_golden_reference writes it)");
    out.index = nlohmann::json::parse(idx);
    std::ifstream bin(dir + "/golden.bin", std::ios::binary);
    bin.seekg(0, std::ios::end);
    out.data.resize(static_cast<std::size_t>(bin.tellg()) / sizeof(double));
    bin.seekg(0);
    bin.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(out.data.size() * sizeof(double)));
    return out;
  }();
  return g;
}

/// err = max_i |a_i − r_i| / max(|r_i|, rms(r)) over the entries where keep(i).
template <class A, class Keep>
double scaled_error(const A& a, const std::vector<double>& r, Keep keep) {
  double sq = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < r.size(); ++i)
    if (keep(i)) sq += r[i] * r[i], ++n;
  const double rms = std::sqrt(sq / double(std::max<std::size_t>(n, 1)));
  double err = 0;
  for (std::size_t i = 0; i < r.size(); ++i)
    if (keep(i)) err = std::max(err, std::abs(double(a[i]) - r[i]) / std::max(std::abs(r[i]), rms));
  return err;
}

template <class T>
struct Tolerance;
template <>
struct Tolerance<double> {
  static constexpr double z = 1e-10, grad = 1e-10;
};
template <>
struct Tolerance<float> {
  static constexpr double z = 2e-5, grad = 1e-4;
};
}  // namespace

TEST_CASE_TEMPLATE("golden: forward and parameter gradients match the PyTorch Qwen2 reference", T, float, double) {
  const auto& g = golden();
  const auto& cfgj = g.index["config"];
  nn::TransformerConfig cfg;
  cfg.vocab_size = cfgj["vocab_size"], cfg.hidden_size = cfgj["hidden_size"];
  cfg.intermediate_size = cfgj["intermediate_size"], cfg.num_layers = cfgj["num_layers"];
  cfg.num_heads = cfgj["num_heads"], cfg.num_kv_heads = cfgj["num_kv_heads"];
  cfg.rms_norm_eps = cfgj["rms_norm_eps"], cfg.rope_theta = cfgj["rope_theta"];
  const std::size_t B = g.index["batch"], S = g.index["seq"], H = cfg.hidden_size;
  MESSAGE("reference written by torch ", g.index["torch"].get<std::string>(), ", seed ", g.index["seed"].get<int>());

  cqtest::Qwen2Stack<T> model(cfg);
  for (const auto& slot : model.params().layout().slots()) {
    auto values = g.get("param/" + slot.name);
    auto span = model.params().slot_span(slot.name);
    REQUIRE(values.size() == span.size());
    for (std::size_t i = 0; i < span.size(); ++i) span[i] = static_cast<T>(values[i]);
  }
  auto to_int = [](const std::vector<double>& v) { return std::vector<std::int64_t>(v.begin(), v.end()); };
  const auto ids = to_int(g.get("input/input_ids")), mask = to_int(g.get("input/attention_mask")),
             positions = to_int(g.get("input/position_ids"));
  std::vector<T> values, weights;
  for (double v : g.get("input/numeric_values")) values.push_back(static_cast<T>(v));
  // dz = R at valid positions, 0 at padding (the reference's loss is Σ_valid R·z)
  const auto r = g.get("input/loss_weights");
  for (std::size_t i = 0; i < r.size(); ++i) weights.push_back(mask[i / H] ? static_cast<T>(r[i]) : T(0));

  typename cqtest::Qwen2Stack<T>::Cache cache;
  auto z = model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), TensorView<const T, 2>(values.data(), {B, S}),
                         TensorView<const std::int64_t, 2>(mask.data(), {B, S}),
                         TensorView<const std::int64_t, 2>(positions.data(), {B, S}), cache);
  auto grads = model.make_gradients();
  std::vector<T> dvalues(B * S, T(0));
  model.backward(cache, TensorView<const T, 3>(weights.data(), {B, S, H}), grads, TensorView<T, 2>(dvalues.data(), {B, S}));

  auto valid = [&](std::size_t i) { return mask[i / H] == 1; };
  auto all = [](std::size_t) { return true; };
  const auto z64 = g.get("f64/z"), z32 = g.get("f32/z");
  const double z_err = scaled_error(z.data, z64, valid);
  MESSAGE("z: error ", z_err, " (torch float32: ", scaled_error(z32, z64, valid), ")");
  CHECK(z_err <= Tolerance<T>::z);
  CHECK(scaled_error(z32, z64, valid) <= Tolerance<float>::z);

  double worst = 0, worst_torch32 = 0;
  std::string worst_name;
  for (const auto& slot : model.params().layout().slots()) {
    const auto ref = g.get("f64/grad/" + slot.name), ref32 = g.get("f32/grad/" + slot.name);
    const auto span = grads.slot_span(slot.name);
    const double err = scaled_error(span, ref, all);
    CAPTURE(slot.name);
    CHECK(err <= Tolerance<T>::grad);
    worst_torch32 = std::max(worst_torch32, scaled_error(ref32, ref, all));
    if (err > worst) worst = err, worst_name = slot.name;
  }
  // At v = 0, f(v) = sign(v)·log1p(|v|) ≈ v has derivative 1 (our grad_check confirms it);
  // autograd's sign/abs subgradients give 0 there, so v = 0 entries are not compared.
  auto nonzero = [&](std::size_t i) { return values[i] != T(0); };
  const double dv_err = scaled_error(dvalues, g.get("f64/numeric_values.grad"), nonzero);
  CHECK(dv_err <= Tolerance<T>::grad);
  MESSAGE("parameter gradients: worst error ", worst, " (", worst_name, "), torch float32's worst ", worst_torch32,
          "; numeric-value gradient error ", dv_err);
  CHECK(worst_torch32 <= Tolerance<float>::grad);
}
