// Build a small generic Qwen2 stack, run it forward on given embeddings, take the gradients of
// every parameter and of the embeddings, and check a few of them with grad_check. Parameters and
// gradients live in two arenas whose slots carry Hugging Face names; the stack owns none of them.
#include <causalqwen/nn.hpp>

#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;

int main() {
  nn::TransformerConfig config{.vocab_size = 100, .hidden_size = 32, .intermediate_size = 64, .num_layers = 2,
                               .num_heads = 4, .num_kv_heads = 2, .rms_norm_eps = 1e-6, .rope_theta = 1e6};
  nn::Transformer<double> stack(config);
  auto layout = std::make_shared<cq::Layout>();
  stack.add_params(*layout);  // model.layers.{0,1}.*, model.norm.weight
  cq::Arena<double> params(layout), grads(layout);
  nn::init_random(params, /*seed=*/42, /*std=*/0.1);
  std::vector<double> e(6 * 32);  // the embeddings [B=1, S=6, H=32], from any embedding layer
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = std::cos(0.37 * double(i));
  nn::Transformer<double>::Cache cache;
  auto forward = [&] {  // z [1,6,32]
    return stack.forward(params, cq::TensorView<const double, 3>(e.data(), {1, 6, 32}), {}, {}, cache);
  };
  auto z = forward();
  std::vector<double> r(z.size());  // L = Σ r ⊙ z for a fixed r, so dL/dz = r
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = std::sin(double(i));
  const auto de = stack.backward(params, cache, cq::TensorView<const double, 3>(r.data(), z.shape), grads);
  const std::vector<double> d_embeddings(de.begin(), de.end());

  auto loss = [&] {
    double s = 0, i = 0;
    for (double v : forward()) s += std::sin(i++) * v;
    return s;
  };
  fmt::print("{} parameters; L = {:.6f}\n", params.layout().count(), loss());
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight",
                           "model.norm.weight"}) {
    double sq = 0;
    for (double g : grads.slot_span(name)) sq += g * g;
    fmt::print("  |dL/d {:<42}| = {:.6e}\n", name, std::sqrt(sq));
  }

  // Central differences on every 37th parameter and every 5th embedding entry (grad_check is
  // public: check your own layers).
  cq::autodiff::GradCheckOptions options;
  options.max_coordinates = params.layout().count() / 37;
  auto result = cq::autodiff::grad_check(params.span(), grads.span(), loss, options);
  fmt::print("parameters: {}\n", result.message());
  options.max_coordinates = e.size() / 5;
  auto result_e = cq::autodiff::grad_check(std::span<double>(e), std::span<const double>(d_embeddings), loss, options);
  fmt::print("embeddings: {}\n", result_e.message());
  return result.ok && result_e.ok ? 0 : 1;
}
