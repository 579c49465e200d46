// DecoderBlock and the whole 2-layer Transformer: gradients of every parameter, names, errors.
#include "../support/qwen2_stack.hpp"
#include "grad_harness.hpp"

#include <causalqwen/nn.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
using cq::TensorView;
using cqtest::randn;

namespace {
constexpr std::size_t B = 2, S = 5, H = 8;
nn::TransformerConfig tiny(std::size_t layers) {
  nn::TransformerConfig c;
  c.vocab_size = 11, c.hidden_size = H, c.intermediate_size = 12, c.num_layers = layers;
  c.num_heads = 4, c.num_kv_heads = 2, c.rms_norm_eps = 1e-6, c.rope_theta = 1e4;
  return c;
}
const std::vector<std::int64_t> kMask = {1, 1, 1, 1, 0, 0, 0, 1, 1, 1};
const std::vector<std::int64_t> kPositions = {0, 1, 2, 3, 4, 1, 1, 0, 1, 2};
std::span<double> as_span(cq::Arena<double>& a) { return a.span(); }
}  // namespace

TEST_CASE("DecoderBlock: gradients of the input and of every parameter, with padding") {
  const std::uint64_t seed = 21;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  nn::DecoderBlock<double> block(tiny(1));
  auto layout = std::make_shared<cq::Layout>();
  block.add_params(*layout, "layer.");
  cq::Arena<double> params(layout), grads(layout);
  for (auto& v : params.span()) v = std::normal_distribution<double>(0, 0.4)(rng);
  auto acts_layout = std::make_shared<cq::Layout>();
  block.add_activations(*acts_layout, "a.", B, S);
  auto ws_layout = std::make_shared<cq::Layout>();
  block.add_workspace(*ws_layout, B, S);
  cq::Arena<double> acts(acts_layout), ws_arena(ws_layout);
  auto cache = block.bind_cache(acts, "a.", B, S);
  nn::DecoderBlock<double>::Workspace ws;
  block.bind_workspace(ws_arena, ws);
  nn::RotaryEmbedding<double>::Table table;
  block.rope().build(TensorView<const std::int64_t, 1>(kPositions.data(), {B * S}), table);
  auto x = randn(B * S * H, rng), r = randn(B * S * H, rng);
  std::vector<double> y(B * S * H), dx(B * S * H, 0.0);
  const auto p = block.bind_params(params, "layer."), g = block.bind_params(grads, "layer.");
  auto loss = [&] {
    block.forward(p, TensorView<const double, 2>(x.data(), {B * S, H}), TensorView<double, 2>(y.data(), {B * S, H}),
                  TensorView<const std::int64_t, 2>(kMask.data(), {B, S}), table, cache, ws);
    return cqtest::dot(r, y);
  };
  loss();
  block.backward(p, g, cache, TensorView<const double, 2>(r.data(), {B * S, H}), TensorView<double, 2>(dx.data(), {B * S, H}), ws);
  cqtest::check_gradients({{"x", x, dx}, {"parameters", as_span(params), as_span(grads)}}, loss);
}

TEST_CASE("Transformer (2 layers, numeric embedding, padding, explicit position_ids): every gradient") {
  const std::uint64_t seed = 22;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  cqtest::Qwen2Stack<double> model(tiny(2));
  model.init_random(seed, 0.3);
  auto grads = model.make_gradients();
  std::vector<std::int64_t> ids = {1, 4, 10, 4, 2, 0, 0, 7, 3, 9};
  std::vector<double> values = {0, 0, 3.5, 0, 0, 0, 0, 0, -120.0, 0};
  std::vector<double> dvalues(B * S, 0.0);
  auto r = randn(B * S * H, rng);
  cqtest::Qwen2Stack<double>::Cache cache;
  auto run = [&] {
    return model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), TensorView<const double, 2>(values.data(), {B, S}),
                         TensorView<const std::int64_t, 2>(kMask.data(), {B, S}),
                         TensorView<const std::int64_t, 2>(kPositions.data(), {B, S}), cache);
  };
  auto loss = [&] {
    auto z = run();
    return cqtest::dot(r, std::span<const double>(z.data, z.size()));
  };
  auto z = run();
  CHECK(z.shape == cq::Shape<3>{B, S, H});
  model.backward(cache, TensorView<const double, 3>(r.data(), {B, S, H}), grads, TensorView<double, 2>(dvalues.data(), {B, S}));
  cqtest::check_gradients({{"parameters", model.params().span(), grads.span()}, {"numeric values", values, dvalues}}, loss);
  // backward accumulates: a second call doubles every gradient
  std::vector<double> once(grads.span().begin(), grads.span().end());
  run();
  model.backward(cache, TensorView<const double, 3>(r.data(), {B, S, H}), grads);
  for (std::size_t i = 0; i < once.size(); i += 7) CHECK(grads.span()[i] == doctest::Approx(2 * once[i]));
}

TEST_CASE_TEMPLATE("Transformer: Hugging Face parameter names, shapes and counts", T, float, double) {
  cqtest::Qwen2Stack<T> model(tiny(2));
  const auto& layout = model.params().layout();
  CHECK(model.template param<2>("model.embed_tokens.weight").shape == cq::Shape<2>{11, H});
  CHECK(model.template param<2>("model.layers.1.self_attn.q_proj.weight").shape == cq::Shape<2>{8, H});
  CHECK(model.template param<2>("model.layers.1.self_attn.k_proj.weight").shape == cq::Shape<2>{4, H});
  CHECK(model.template param<1>("model.layers.0.self_attn.v_proj.bias").shape == cq::Shape<1>{4});
  CHECK(model.template param<2>("model.layers.0.mlp.down_proj.weight").shape == cq::Shape<2>{H, 12});
  CHECK(model.template param<1>("model.norm.weight").shape == cq::Shape<1>{H});
  CHECK(model.template param<1>("causal.num_direction").shape == cq::Shape<1>{H});
  CHECK_FALSE(layout.contains("model.layers.0.self_attn.o_proj.bias"));  // o_proj has no bias
  // per layer: 2·H norms + (8+4+4)·H + 16 qkv + H·8 o + 3·12·H mlp
  const std::size_t per_layer = 2 * H + 16 * H + 16 + H * 8 + 3 * 12 * H;
  CHECK(layout.count() == 11 * H + H + 2 * per_layer + H);
  // k and v weights are packed right after q (one fused GEMM)
  CHECK(layout.slot("model.layers.0.self_attn.k_proj.weight").offset ==
        layout.slot("model.layers.0.self_attn.q_proj.weight").offset + 8 * H);
  CHECK(layout.slot("model.layers.0.self_attn.v_proj.bias").offset ==
        layout.slot("model.layers.0.self_attn.k_proj.bias").offset + 4);
  auto big = nn::TransformerConfig::qwen2_5_0_5b();
  big.validate();
  CHECK(big.head_dim() == 64);
  CHECK(big.group_size() == 7);
}

TEST_CASE("bad configs and shapes give clear errors") {
  auto c = tiny(1);
  c.hidden_size = 10;
  CHECK_THROWS_WITH_AS(cqtest::Qwen2Stack<float>{c},
                       "causalqwen::Transformer: hidden_size 10 is not divisible by num_attention_heads 4",
                       cq::DomainError);
  c = tiny(1);
  c.num_kv_heads = 3;
  CHECK_THROWS_WITH_AS(cqtest::Qwen2Stack<float>{c},
                       "causalqwen::Transformer: num_attention_heads 4 is not divisible by num_key_value_heads 3",
                       cq::DomainError);
  c = tiny(1);
  c.hidden_size = 4;  // head_dim 1
  CHECK_THROWS_WITH_AS(cqtest::Qwen2Stack<float>{c}, "causalqwen::Transformer: head_dim 1 must be even for rotary embeddings",
                       cq::DomainError);
  cqtest::Qwen2Stack<float> model(tiny(1));
  model.init_random(1);
  cqtest::Qwen2Stack<float>::Cache cache;
  std::vector<std::int64_t> ids(B * S, 1), mask(B * (S + 1), 1);
  CHECK_THROWS_WITH_AS(model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), {},
                                     TensorView<const std::int64_t, 2>(mask.data(), {B, S + 1}), {}, cache),
                       "causalqwen::Transformer::forward: attention_mask must have shape [2,5], got [2,6]",
                       cq::DomainError);
  mask[3] = 2;
  CHECK_THROWS_WITH_AS(model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), {},
                                     TensorView<const std::int64_t, 2>(mask.data(), {B, S}), {}, cache),
                       "causalqwen::Transformer::forward: attention_mask must hold 0 or 1, got 2", cq::DomainError);
  ids[2] = 11;
  CHECK_THROWS_WITH_AS(model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), {}, {}, {}, cache),
                       "causalqwen::Embedding::forward: token id 11 at position 2 is outside [0, 11)", cq::DomainError);
  ids[2] = 1;
  auto z = model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), {}, {}, {}, cache);
  std::vector<float> dz(B * S * H + H);
  auto grads = model.make_gradients();
  CHECK_THROWS_WITH_AS(model.backward(cache, TensorView<const float, 3>(dz.data(), {B, S + 1, H}), grads),
                       "causalqwen::Transformer::backward: dz must have shape [2,5,8], got [2,6,8]", cq::DomainError);
  CHECK(z.size() == B * S * H);
  // a forward that kept no attention weights (an evaluation on a fresh cache) cannot be differentiated
  cqtest::Qwen2Stack<float>::Cache eval_cache;
  eval_cache.backbone.keep_for_backward = false;
  model.forward(TensorView<const std::int64_t, 2>(ids.data(), {B, S}), {}, {}, {}, eval_cache);
  CHECK_THROWS_WITH_AS(model.backward(eval_cache, TensorView<const float, 3>(dz.data(), {B, S, H}), grads),
                       "causalqwen::Transformer::backward: the forward pass kept no attention weights "
                       "(Cache::keep_for_backward was false): run it again with true",
                       cq::DomainError);
}

TEST_CASE_TEMPLATE("Transformer: one cache reused across shapes gives the same z as a fresh one", T, float, double) {
  cqtest::Qwen2Stack<T> model(tiny(2));
  model.init_random(5, 0.2);
  std::vector<std::int64_t> ids = {1, 4, 10, 4, 2, 0, 3, 7, 3, 9};
  auto run = [&](typename cqtest::Qwen2Stack<T>::Cache& cache, std::size_t b, std::size_t s) {
    auto z = model.forward(TensorView<const std::int64_t, 2>(ids.data(), {b, s}), {}, {}, {}, cache);
    return std::vector<T>(z.begin(), z.end());
  };
  typename cqtest::Qwen2Stack<T>::Cache reused, fresh_small, fresh_big;
  const auto big = run(reused, 2, 5);
  const auto small = run(reused, 1, 3);
  CHECK(run(reused, 2, 5) == big);
  CHECK(run(fresh_small, 1, 3) == small);
  CHECK(run(fresh_big, 2, 5) == big);
  // causality: the first 3 tokens of row 0 do not depend on tokens 3 and 4
  for (std::size_t i = 0; i < 3 * H; ++i) CHECK(small[i] == doctest::Approx(big[i]).epsilon(1e-5));
}
