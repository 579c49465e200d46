// optim/: AdamW against torch.optim.AdamW and a hand computation, bfloat16 moments (the streaming
// optimiser's update bit for bit, near the float update), clipping, schedules, decay and
// freezing rules, scale clamps.
#include <causalqwen/linalg/bf16_copies.hpp>
#include <causalqwen/optim.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/parameter_rules.hpp>
#include <doctest/doctest.h>

#include "../support/frozen_backbone.hpp"
#include "../support/test_support.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace cq = causalqwen;
namespace co = causalqwen::optim;
using cqtest::close_rel;
using cqtest::test_seed;

namespace {
std::shared_ptr<cq::Layout> vector_layout(std::size_t n) {
  auto l = std::make_shared<cq::Layout>();
  l->add("w", {n});
  return l;
}
}  // namespace

// Reference: /usr/bin/python3 with torch (float64):
//   p = Parameter([0.5, -1.25, 2.0, 0.0, -3.0]); AdamW([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8,
//   weight_decay=0.1); three steps with the gradients below; p printed with float.hex after each.
TEST_CASE("AdamW matches torch.optim.AdamW over three steps (double)") {
  auto layout = vector_layout(5);
  cq::Arena<double> p(layout), g(layout);
  const double init[5] = {0.5, -1.25, 2.0, 0.0, -3.0};
  std::copy(init, init + 5, p.data());
  const double grads[3][5] = {{0.1, -0.2, 0.3, 1e-4, -5.0}, {-0.3, 0.1, 0.3, 0.0, 2.0}, {0.05, 0.05, -0.6, -1e-4, 1.0}};
  const double torch_after[3][5] = {
      {0x1.947ae1f37a8a7p-2, -0x1.23333348acc20p+0, 0x1.e147ae22cbeb3p+0, -0x1.998f1d838b953p-4, -0x1.6f5c28f63082dp+1},
      {0x1.c30a4d9d554c4p-2, -0x1.1978431332ca6p+0, 0x1.c2de00ee3484ep+0, -0x1.53f0b41b364b0p-3, -0x1.67433cb6fa5e0p+1},
      {0x1.daf216a1ce06bp-2, -0x1.151561a1846cap+0, 0x1.c04b8f1d4b3cep+0, -0x1.3ef5110b94c02p-3, -0x1.61cd5fd9782cdp+1}};
  co::AdamW<double> adam(layout, {0.9, 0.999, 1e-8, 0.1});
  for (int s = 0; s < 3; ++s) {
    std::copy(grads[s], grads[s] + 5, g.data());
    adam.step(p, g, 0.1);
    for (int i = 0; i < 5; ++i) CHECK(close_rel(p.data()[i], torch_after[s][i], 1e-14, 1e-12));
  }
  CHECK(adam.steps() == 3);
  // By hand, step 1 of element 0: m = 0.01, v = 1e-5, m̂ = 0.1, v̂ = 0.01;
  // θ = 0.5·(1 − 0.1·0.1) − 0.1·0.1/(√0.01 + 1e-8) = 0.495 − 0.1·0.9999999 = 0.39500001
  CHECK(close_rel(torch_after[0][0], 0.495 - 0.1 * (0.1 / (0.1 + 1e-8)), 1e-15));
}

TEST_CASE("AdamW in float agrees with the double update to float rounding") {
  auto layout = vector_layout(5);
  cq::Arena<float> p(layout), g(layout);
  const float init[5] = {0.5f, -1.25f, 2.0f, 0.0f, -3.0f};
  std::copy(init, init + 5, p.data());
  const float grads[5] = {0.1f, -0.2f, 0.3f, 1e-4f, -5.0f};
  std::copy(grads, grads + 5, g.data());
  co::AdamW<float> adam(layout, {0.9, 0.999, 1e-8, 0.1});
  adam.step(p, g, 0.1);
  const double torch_after[5] = {0.395000009999999, -1.1375000049999997, 1.8800000033333333, -0.0999900009999,
                                 -2.8700000001999997};
  for (int i = 0; i < 5; ++i) CHECK(close_rel(p.data()[i], torch_after[i], 1e-6, 1e-3));
}

TEST_CASE("AdamW with bfloat16 moments: StreamingAdamW's update bit for bit, near the float update, half the state") {
  const auto seed = test_seed(53, "adamw bf16 moments");
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a.weight", {300, 7});  // more than one thread chunk: the rounding must not depend on the split
  layout->add("b.bias", {5});
  cq::ParamRules rules;
  rules.no_decay.insert("b.bias");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  cq::Arena<float> p_bf16(layout), p_stream(layout), p_full(layout), g(layout);
  for (auto& x : p_bf16.span()) x = normal(rng);
  std::copy_n(p_bf16.data(), layout->total(), p_stream.data());
  std::copy_n(p_bf16.data(), layout->total(), p_full.data());
  co::AdamW<float> bf16(layout, {}, rules, co::MomentStorage::bf16), full(layout, {}, rules);
  co::StreamingAdamW<float> stream(layout, {}, rules, co::MomentStorage::bf16);
  for (int s = 0; s < 4; ++s) {
    for (auto& x : g.span()) x = normal(rng);
    std::copy_n(g.data(), layout->total(), stream.gradients().data());
    bf16.step(p_bf16, g, 1e-2, 0.5);
    full.step(p_full, g, 1e-2, 0.5);
    stream.step(p_stream, 1e-2, 0.5);
  }
  CHECK(std::memcmp(p_bf16.data(), p_stream.data(), layout->total() * sizeof(float)) == 0);
  CHECK(std::memcmp(bf16.first_moment_bf16().data(), stream.first_moment_bf16().data(), layout->total() * 2) == 0);
  CHECK(std::memcmp(bf16.second_moment_bf16().data(), stream.second_moment_bf16().data(), layout->total() * 2) == 0);
  // the moments are the float moments carried at 8 bits (one bfloat16 step is 2⁻⁷ relative)
  double err = 0, size = 0;
  for (std::size_t i = 0; i < layout->total(); ++i) {
    const double m16 = cq::bf16_to_float(bf16.first_moment_bf16().data()[i]), m32 = full.first_moment().data()[i];
    err += (m16 - m32) * (m16 - m32), size += m32 * m32;
  }
  MESSAGE("relative RMS difference of the bfloat16 first moments: ", std::sqrt(err / size));
  CHECK(std::sqrt(err / size) < 1.0 / 64);
  CHECK(std::sqrt(err / size) > 0.0);
  CHECK(bf16.state_bytes() * 2 == full.state_bytes());
  // the storage decides which moments exist, and bfloat16 moments need float parameters
  CHECK_THROWS_WITH_AS(bf16.first_moment(), doctest::Contains("stored as bfloat16"), cq::DomainError);
  CHECK_THROWS_WITH_AS(full.first_moment_bf16(), doctest::Contains("stored as T"), cq::DomainError);
  CHECK_THROWS_WITH_AS(co::AdamW<double>(layout, {}, rules, co::MomentStorage::bf16),
                       doctest::Contains("bfloat16 moments need float parameters"), cq::DomainError);
}

TEST_CASE("AdamW keeps an UpdateFollower current (the bf16 weight copies): the same update, every followed row handed "
          "over, frozen rows too; a sharded step leaves the copies stale") {
  const auto seed = test_seed(54, "adamw follower");
  // q|k|v-like: three consecutive slots form one matrix of 45 rows (a row count that is no multiple of 16 or 4)
  auto layout = std::make_shared<cq::Layout>();
  layout->add("m.q", {20, 37});
  layout->add("m.k", {13, 37}, cq::Placement::packed);
  layout->add("m.v", {12, 37}, cq::Placement::packed);
  layout->add("m.bias", {45});
  layout->add("frozen.w", {9, 20});
  cq::ParamRules rules;
  rules.frozen.insert("frozen.w");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  for (const auto moments : {co::MomentStorage::full, co::MomentStorage::bf16}) {
    cq::Arena<float> p_plain(layout), p_followed(layout), g(layout);
    for (auto& x : p_plain.span()) x = normal(rng);
    std::copy_n(p_plain.data(), layout->total(), p_followed.data());
    cq::linalg::Bf16Copies copies;
    const auto m = copies.add(p_followed, cq::TensorView<const float, 2>(p_followed.view<2>("m.q").data, {45, 37}));
    const auto f = copies.add(p_followed, cq::TensorView<const float, 2>(p_followed.view<2>("frozen.w")));
    CHECK(copies.bytes() == (48 * 48 + 12 * 32) * 2);  // rows padded to 4, columns to 16
    CHECK(copies.follow(layout->slot("m.bias")) == cq::linalg::UpdateFollower<float>::not_followed);
    CHECK(!copies.current(p_followed.version()));
    co::AdamW<float> plain(layout, {}, rules, moments), followed(layout, {}, rules, moments);
    for (int s = 0; s < 3; ++s) {
      for (auto& x : g.span()) x = normal(rng);
      plain.step(p_plain, g, 1e-2, 0.5);
      followed.step(p_followed, g, 1e-2, 0.5, &copies);
      CHECK(copies.current(p_followed.version()));
    }
    CHECK(std::memcmp(p_plain.data(), p_followed.data(), layout->total() * sizeof(float)) == 0);
    std::size_t differ = 0;
    for (std::size_t r = 0; r < 45; ++r)
      for (std::size_t c = 0; c < 37; ++c)
        differ += m.bf16[cq::linalg::panel_index(r, c, 48)] != cq::float_to_bf16(p_followed.data()[r * 37 + c]);
    const float* frozen = p_followed.view<2>("frozen.w").data;
    for (std::size_t r = 0; r < 9; ++r)
      for (std::size_t c = 0; c < 20; ++c) differ += f.bf16[cq::linalg::panel_index(r, c, 32)] != cq::float_to_bf16(frozen[r * 20 + c]);
    CHECK(differ == 0);
    // any other change of the parameters makes the copies stale until the next step hands them over
    p_followed.touch();
    CHECK(!copies.current(p_followed.version()));
    followed.step(p_followed, g, 1e-2, 0.5, &copies);
    CHECK(copies.current(p_followed.version()));
    // a shard's step (part of the elements) does not keep them
    co::AdamW<float> shard(layout, {}, rules, moments, cq::ElementRange{0, 100});
    shard.step(p_followed, std::span<const float>(g.data(), 100), 1e-2, 0.5, &copies);
    CHECK(!copies.current(p_followed.version()));
  }
}

TEST_CASE("the model's decay and freezing rules follow its slot names") {
  const std::vector<const char*> no_decay{"model.layers.0.input_layernorm.weight", "model.norm.weight",
                                          "model.layers.0.self_attn.q_proj.bias", "causal.action.b_noise",
                                          "causal.ovr_threshold", "causal.num_direction", "causal.abduction.scale.bias"};
  const std::vector<const char*> decay{"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
                                       "causal.abduction.loc.weight", "causal.action.cls.weight",
                                       "causal.action.reg.weight"};
  cq::Layout layout;
  for (const char* name : no_decay) layout.add(name, {2});
  for (const char* name : decay) layout.add(name, {2});
  auto rules = cq::model::parameter_rules(layout);
  for (const char* name : no_decay) CHECK_MESSAGE(!rules.decays(name), name);
  for (const char* name : decay) CHECK_MESSAGE(rules.decays(name), name);
  CHECK(rules.scale_bias == "causal.abduction.scale.bias");
  CHECK(rules.trained("model.embed_tokens.weight"));
  CHECK(!rules.trained("causal.ovr_threshold"));  // fixed threshold by default
  rules = cq::model::parameter_rules(layout, {.learn_threshold = true});
  CHECK(rules.trained("causal.ovr_threshold"));
  rules = cq::model::parameter_rules(layout, {.freeze = cq::model::Freeze::backbone, .learn_threshold = true});
  CHECK(!rules.trained("model.embed_tokens.weight"));
  CHECK(rules.trained("causal.action.cls.weight"));
  CHECK(rules.trained("causal.num_direction"));
  CHECK(rules.trained("causal.ovr_threshold"));
  rules = cq::model::parameter_rules(layout, {.freeze = cq::model::Freeze::heads, .learn_threshold = true});
  CHECK(rules.trained("model.embed_tokens.weight"));
  CHECK(rules.trained("model.norm.weight"));
  CHECK(!rules.trained("causal.action.cls.weight"));
  CHECK(!rules.trained("causal.num_direction"));
  CHECK(!rules.trained("causal.ovr_threshold"));
  cq::model::Freeze freeze = cq::model::Freeze::none;
  CHECK(cq::model::parse_freeze("heads", freeze));
  CHECK(freeze == cq::model::Freeze::heads);
  CHECK(!cq::model::parse_freeze("all", freeze));
  CHECK(freeze == cq::model::Freeze::heads);
}

TEST_CASE("empty rules train and decay every slot") {
  const cq::ParamRules rules;
  CHECK(rules.trained("causal.ovr_threshold"));
  CHECK(rules.decays("a.bias"));
}

TEST_CASE("no weight decay on a no-decay slot: a zero gradient leaves it unchanged") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a.weight", {3});
  layout->add("a.bias", {3});
  cq::Arena<double> p(layout), g(layout);
  for (auto& v : p.span()) v = 2.0;
  co::AdamW<double> adam(layout, {0.9, 0.999, 1e-8, 0.5}, cq::model::parameter_rules(*layout));
  adam.step(p, g, 0.1);
  for (double v : p.slot_span("a.bias")) CHECK(v == 2.0);
  for (double v : p.slot_span("a.weight")) CHECK(v == doctest::Approx(2.0 * (1 - 0.1 * 0.5)).epsilon(1e-15));
}

TEST_CASE_TEMPLATE("freezing the backbone leaves every backbone slot bit-identical", T, float, double) {
  const auto seed = test_seed(7, "freeze");
  constexpr cq::model::StaticConfig tiny{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_layers = 1, .num_heads = 2,
      .num_kv_heads = 1, .causal_size = 8, .num_classes = 15, .num_token_id = 14};
  cq::model::CausalQwen<T, tiny> model;
  model.init_random(seed);
  auto before = std::vector<T>(model.params().span().begin(), model.params().span().end());
  auto grads = model.make_gradients();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (auto& v : grads.span()) v = static_cast<T>(normal(rng));
  const auto rules = cq::model::parameter_rules(model.layout(), {.freeze = cq::model::Freeze::backbone});
  co::AdamW<T> adam(model.params().shared_layout(), {}, rules);
  for (int s = 0; s < 3; ++s) adam.step(model.params(), grads, 0.05);
  const std::size_t changed_causal = cqtest::require_only_heads_changed(model.params(), before, adam.first_moment());
  CHECK(changed_causal > 100);
}

TEST_CASE("global-norm clipping") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a", {2});
  layout->add("causal.b", {2});
  cq::Arena<double> g(layout);
  auto a = g.slot_span("a");
  auto b = g.slot_span("causal.b");
  a[0] = 3, a[1] = 0, b[0] = 0, b[1] = 4;  // ‖g‖ = 5
  CHECK(co::global_grad_norm(g) == 5.0);
  const auto only_causal = cq::model::parameter_rules(*layout, {.freeze = cq::model::Freeze::backbone});
  CHECK(co::global_grad_norm(g, only_causal) == 4.0);
  CHECK(co::clip_grad_norm(g, 10.0) == 5.0);  // below the limit: unchanged
  CHECK(a[0] == 3.0);
  CHECK(co::clip_grad_norm(g, 1.0) == 5.0);
  CHECK(a[0] == doctest::Approx(3.0 / (5.0 + 1e-6)).epsilon(1e-15));
  CHECK(b[1] == doctest::Approx(4.0 / (5.0 + 1e-6)).epsilon(1e-15));
  CHECK(co::global_grad_norm(g) == doctest::Approx(1.0).epsilon(1e-6));
  // a large arena: the blocked sum equals a long-double reference
  const auto seed = test_seed(11, "clip large");
  auto big = vector_layout(100003);
  cq::Arena<float> gb(big);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  long double ref = 0;
  for (auto& v : gb.span()) {
    v = static_cast<float>(normal(rng));
    ref += static_cast<long double>(v) * v;
  }
  CHECK(close_rel(co::global_grad_norm(gb), std::sqrt(static_cast<double>(ref)), 1e-12));
}

TEST_CASE("learning-rate schedules") {
  co::LrSchedule c{co::LrShape::constant, 0.1, 0, 100, 0.1};
  CHECK(c.at(0) == 0.1);
  CHECK(c.at(99) == 0.1);
  co::LrSchedule w{co::LrShape::warmup_cosine, 1.0, 10, 110, 0.1};
  CHECK(w.at(0) == doctest::Approx(0.1));
  CHECK(w.at(4) == doctest::Approx(0.5));
  CHECK(w.at(9) == doctest::Approx(1.0));
  CHECK(w.at(10) == doctest::Approx(1.0));                         // cosine starts at the peak
  CHECK(w.at(60) == doctest::Approx(0.1 + 0.9 * 0.5).epsilon(1e-12));  // half way: (peak+min)/2
  CHECK(w.at(110) == doctest::Approx(0.1));
  CHECK(w.at(500) == doctest::Approx(0.1));                        // capped
  for (std::size_t s = 10; s < 110; ++s) CHECK(w.at(s + 1) <= w.at(s));
  co::LrShape shape;
  CHECK(co::parse_lr_shape("cosine", shape));
  CHECK(shape == co::LrShape::warmup_cosine);
  CHECK(!co::parse_lr_shape("linear", shape));
}

TEST_CASE("alpha schedule anneals from start to end") {
  co::AlphaSchedule a{1.0, 0.0, 100, co::AnnealShape::linear};
  CHECK(a.at(0) == 1.0);
  CHECK(a.at(25) == doctest::Approx(0.75));
  CHECK(a.at(100) == 0.0);
  CHECK(a.at(1000) == 0.0);
  co::AlphaSchedule cosine{0.8, 0.1, 10, co::AnnealShape::cosine};
  CHECK(cosine.at(5) == doctest::Approx(0.45));
  CHECK(cosine.at(10) == doctest::Approx(0.1));
  co::AlphaSchedule fixed{0.25, 0.0, 0};
  CHECK(fixed.at(1234) == 0.25);
}

TEST_CASE("scale clamp bounds softplus(b_scale)") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("causal.abduction.scale.bias", {4});
  cq::Arena<double> p(layout);
  auto b = p.slot_span("causal.abduction.scale.bias");
  b[0] = -30, b[1] = 0.0, b[2] = 5.0, b[3] = 200.0;
  const auto rules = cq::model::parameter_rules(*layout);
  co::ScaleClamp clamp{0.1, 100.0};
  CHECK(clamp.apply(p, rules) == 2);
  CHECK(cq::softplus(b[0]) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(b[1] == 0.0);
  CHECK(b[2] == 5.0);
  CHECK(cq::softplus(b[3]) == doctest::Approx(100.0).epsilon(1e-12));
  CHECK(co::ScaleClamp{}.apply(p, rules) == 0);  // inactive by default
  CHECK(!co::ScaleClamp{}.active());
  CHECK(co::ScaleClamp{}.apply(p, cq::ParamRules{}) == 0);  // inactive: no slot needed
  CHECK(cqtest::error_message<cq::DomainError>([&] { clamp.apply(p, cq::ParamRules{}); }) ==
        "causalqwen::ScaleClamp: the parameter rules name no scale-bias slot to clamp (ParamRules::scale_bias is empty)");
}
