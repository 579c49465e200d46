// Build a small Qwen2 transformer, run it forward, take the gradients of every parameter, and
// check a few of them with grad_check. Parameters and gradients live in two arenas whose slots
// carry Hugging Face names.
#include <causalqwen/nn.hpp>

#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;

int main() {
  nn::TransformerConfig config{.vocab_size = 100, .hidden_size = 32, .intermediate_size = 64, .num_layers = 2,
                               .num_heads = 4, .num_kv_heads = 2, .rms_norm_eps = 1e-6, .rope_theta = 1e6};
  nn::Transformer<double> model(config);
  model.init_random(/*seed=*/42, /*std=*/0.1);
  std::vector<std::int64_t> ids = {5, 17, 42, 99, 3, 8};   // [B=1, S=6]
  std::vector<double> numbers = {0, 0, 2.5, 0, 0, 0};      // a number at position 2
  nn::Transformer<double>::Cache cache;
  auto forward = [&] {  // z [1,6,32]
    return model.forward(cq::TensorView<const std::int64_t, 2>(ids.data(), {1, 6}),
                         cq::TensorView<const double, 2>(numbers.data(), {1, 6}), {}, {}, cache);
  };
  auto z = forward();
  std::vector<double> r(z.size());  // L = Σ r ⊙ z for a fixed r, so dL/dz = r
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = std::sin(double(i));
  auto grads = model.make_gradients();
  model.backward(cache, cq::TensorView<const double, 3>(r.data(), z.shape), grads);

  auto loss = [&] {
    double s = 0, i = 0;
    for (double v : forward()) s += std::sin(i++) * v;
    return s;
  };
  fmt::print("{} parameters; L = {:.6f}\n", model.params().layout().count(), loss());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.1.mlp.down_proj.weight", "causal.num_direction"}) {
    double sq = 0;
    for (double g : grads.slot_span(name)) sq += g * g;
    fmt::print("  |dL/d {:<42}| = {:.6e}\n", name, std::sqrt(sq));
  }

  // Central differences on every 37th parameter (grad_check is public: check your own layers).
  cq::autodiff::GradCheckOptions options;
  options.max_coordinates = model.params().layout().count() / 37;
  auto result = cq::autodiff::grad_check(model.params().span(), grads.span(), loss, options);
  fmt::print("{}\n", result.message());
  return result.ok ? 0 : 1;
}
