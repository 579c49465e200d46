// The whole tiny model: every parameter tensor's gradient (backbone, direction vector, heads,
// thresholds, b_noise) against central differences in double, in the deterministic and the
// sampling modes, with padding; the compile-time configuration; conversion-style inits.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/core/random.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/presets.hpp>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

namespace cq = causalqwen;
using cq::model::ActionMode;

namespace {

constexpr cq::model::StaticConfig tiny{.vocab_size = 11, .hidden_size = 8, .intermediate_size = 12, .num_layers = 2, .num_heads = 4,
    .num_kv_heads = 2, .causal_size = 8, .num_classes = 10, .num_token_id = 9};

struct ModelFixture {
  cq::model::CausalQwen<double, tiny> model;
  static constexpr std::size_t B = 2, S = 5;
  std::vector<std::int64_t> ids{1, 4, 9, 3, 2, 7, 9, 5, 0, 0}, mask{1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      labels{4, 9, 3, 9, -100, 9, 5, -100, -100, -100};
  std::vector<double> numeric{0, 0, 12.5, 0, 0, 0, -3.0, 0, 0, 0}, targets{0, 2.0, 0, -40.0, 0, 7.5, 0, 0, 0, 0};
  std::vector<double> uniform;

  explicit ModelFixture(std::uint64_t seed) : model(settings()) {
    model.init_random(seed, 0.3);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 0.3);
    // move the heads off their symmetric inits so every path carries gradient
    for (const auto& name : {cq::model::names::abd_loc_w, cq::model::names::abd_scale_w, cq::model::names::reg_w,
                             cq::model::names::b_noise, cq::model::names::threshold})
      for (auto& v : model.params().slot_span(name)) v += normal(rng);
    std::uniform_real_distribution<double> u01(0.05, 0.95);
    uniform.resize(B * S * tiny.causal_size);
    for (auto& u : uniform) u = u01(rng);
  }
  static cq::model::CausalConfig settings() {
    auto c = tiny.runtime();
    c.ovr_threshold = {0.2};
    c.alpha_gate = 0.2;
    c.gamma_init = 1.5;
    return c;
  }
  cq::model::Batch<double> batch() const {
    return {{ids.data(), {B, S}}, {numeric.data(), {B, S}}, {mask.data(), {B, S}},
            {labels.data(), {B, S}}, {targets.data(), {B, S}}, {}};
  }
  cq::model::SamplingNoise<double> noise(ActionMode mode) const {
    if (mode == ActionMode::deterministic) return {};
    return {0.7, {uniform.data(), {B * S, tiny.causal_size}}};
  }
  double loss(ActionMode mode) {
    typename decltype(model)::Cache cache;
    model.params().touch();  // the parameters changed: |W| caches rebuild
    return model.evaluate(batch(), cache, mode, noise(mode)).L_total;
  }
};

void check_model_gradients(ActionMode mode, std::uint64_t seed) {
  ModelFixture f(seed);
  typename decltype(f.model)::Cache cache;
  auto grads = f.model.make_gradients();
  f.model.train_step(f.batch(), cache, grads, mode, f.noise(mode));
  cq::autodiff::GradCheckOptions opt;
  opt.rtol = 1e-4;
  opt.max_coordinates = 24;
  std::size_t checked = 0;
  for (const auto& slot : f.model.layout().slots()) {
    auto x = f.model.params().slot_span(slot.name);
    auto a = grads.slot_span(slot.name);
    const auto r = cq::autodiff::grad_check(x, std::span<const double>(a.data(), a.size()),
                                            [&] { return f.loss(mode); }, opt);
    INFO(slot.name, ": ", r.message());
    CHECK(r.ok);
    ++checked;
  }
  CHECK(checked == f.model.layout().slots().size());
}

}  // namespace

TEST_CASE("whole model: every parameter tensor's gradient matches central differences (deterministic)") {
  check_model_gradients(ActionMode::deterministic, cqtest::test_seed(41, "model grad deterministic"));
}

TEST_CASE("whole model: every parameter tensor's gradient matches central differences (sampling)") {
  check_model_gradients(ActionMode::sampling, cqtest::test_seed(42, "model grad sampling"));
}

TEST_CASE("compile-time configuration: constants and the runtime config agree") {
  static_assert(cq::model::CausalQwen<float, tiny>::hidden_size == 8);
  static_assert(tiny.head_dim() == 2 && tiny.num_token_id == 9);
  const auto c = tiny.runtime();
  CHECK(c.causal_size == 8);
  CHECK(c.num_classes == 10);
  cq::model::CausalQwen<float, tiny> m;
  CHECK(m.layout().slot("causal.action.cls.weight").shape == std::vector<std::size_t>{10, 8});
  CHECK(m.layout().slot("model.embed_tokens.weight").shape == std::vector<std::size_t>{11, 8});
}

TEST_CASE("runtime configuration errors name the field") {
  auto c = tiny.runtime();
  c.causal_size = 6;
  CHECK(cqtest::error_message<cq::DomainError>([&] { cq::model::CausalQwen<float> m(c); }) ==
        "causalqwen::CausalQwen: causal_size 6 must equal hidden_size 8 (W_loc is initialised to the identity)");
  c = tiny.runtime();
  c.backbone.num_kv_heads = 3;
  CHECK(cqtest::error_message<cq::DomainError>([&] { cq::model::CausalQwen<float> m(c); }) ==
        "causalqwen::CausalQwen: num_attention_heads 4 is not divisible by num_key_value_heads 3");
  c = tiny.runtime();
  c.num_token_id = 10;
  CHECK(cqtest::error_message<cq::DomainError>([&] { cq::model::CausalQwen<float> m(c); }) ==
        "causalqwen::CausalQwen: num_token_id 10 must lie in [0, num_classes = 10)");
}

TEST_CASE("initialisation: W_loc = I, scale_U = γ_init everywhere, b_noise and thresholds from the config") {
  auto c = tiny.runtime();
  c.gamma_init = 10.0;
  cq::model::CausalQwen<double, tiny> m(c);
  m.init_random(7);
  ModelFixture f(7);
  typename decltype(m)::Cache cache;
  m.evaluate(f.batch(), cache);
  const auto& h = cache.head;
  for (std::size_t i = 0; i < h.abduction.scale_U.size(); ++i) CHECK(h.abduction.scale_U[i] == doctest::Approx(10.0).epsilon(1e-14));
  // loc_U = z exactly (identity, zero bias)
  const auto z = cache.backbone.z;
  for (std::size_t i = 0; i < z.size(); ++i) CHECK(h.abduction.loc_U[i] == z[i]);
  for (auto v : m.params().slot_span("causal.action.b_noise")) CHECK(v == doctest::Approx(0.1));
  for (auto v : m.params().slot_span("causal.ovr_threshold")) CHECK(v == 10.0);
}

TEST_CASE("the loss and every gradient are the same bits on 1 and 2 threads") {
  const auto seed = cqtest::test_seed(64, "thread-count independence");
  auto config = cq::model::preset_config("tiny", 63);  // H 64, F 176: products large enough to be split
  config.ovr_threshold = {1.0};
  cq::model::CausalQwen<float> model(config);
  model.init_random(seed);
  const std::size_t B = 2, S = 48;
  std::vector<std::int64_t> ids(B * S), labels(B * S, -100);
  std::vector<float> values(B * S, 0.0f), targets(B * S, 0.0f);
  for (std::size_t i = 0; i < B * S; ++i) {
    ids[i] = static_cast<std::int64_t>(cq::splitmix64(seed + i) % 63);
    if (i % 7 == 3) ids[i] = 63, values[i] = static_cast<float>(i) * 0.25f;
  }
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t + 1 < S; ++t) labels[b * S + t] = ids[b * S + t + 1], targets[b * S + t] = values[b * S + t + 1];
  const cq::model::Batch<float> batch{{ids.data(), {B, S}}, {values.data(), {B, S}}, {}, {labels.data(), {B, S}},
                                      {targets.data(), {B, S}}, {}};
  const int threads_before = omp_get_max_threads();
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    typename cq::model::CausalQwen<float>::Cache cache;
    auto grads = model.make_gradients();
    const auto metrics = model.train_step(batch, cache, grads);
    return std::pair{std::vector<float>(grads.data(), grads.data() + grads.size()), metrics.L_total};
  };
  const auto [grads_one, loss_one] = run(1);
  const auto [grads_two, loss_two] = run(2);
  omp_set_num_threads(threads_before);
  CHECK(std::memcmp(&loss_one, &loss_two, sizeof(double)) == 0);
  REQUIRE(grads_one.size() == grads_two.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < grads_one.size(); ++i) differ += std::memcmp(&grads_one[i], &grads_two[i], sizeof(float)) != 0;
  CHECK(differ == 0);
}

TEST_CASE("an evaluation keeps no attention weights: the training forward's bits, less memory") {
  // two rows of 70 tokens (two 64-token attention blocks), the second right-padded
  cq::model::CausalQwen<float, tiny> model(ModelFixture::settings());
  model.init_random(7, 0.3);
  constexpr std::size_t B = 2, S = 70;
  std::vector<std::int64_t> ids(B * S), mask(B * S, 1), labels(B * S);
  std::vector<float> numeric(B * S, 0.0f), targets(B * S, 0.0f);
  for (std::size_t i = 0; i < B * S; ++i) {
    ids[i] = static_cast<std::int64_t>((i * 7 + 3) % 9);
    labels[i] = static_cast<std::int64_t>((i * 5 + 1) % 9);
    if (i % 11 == 4) ids[i] = 9, numeric[i] = 0.5f * float(i);
    if (i % 13 == 6) labels[i] = 9, targets[i] = -0.25f * float(i);
  }
  for (std::size_t t = S - 5; t < S; ++t) mask[S + t] = 0, labels[S + t] = -100;
  const cq::model::Batch<float> batch{{ids.data(), {B, S}}, {numeric.data(), {B, S}}, {mask.data(), {B, S}},
                                      {labels.data(), {B, S}}, {targets.data(), {B, S}}, {}};
  typename decltype(model)::Cache eval_cache, train_cache;
  const auto evaluated = model.evaluate(batch, eval_cache);
  auto grads = model.make_gradients();
  const auto trained = model.train_step(batch, train_cache, grads);
  const std::size_t train_elements = train_cache.backbone.acts.size();
  // the training cache holds P of every layer, [B, nkv, S, G, S]; the evaluation's none
  CHECK(train_elements - eval_cache.backbone.acts.size() == tiny.num_layers * B * tiny.num_kv_heads * S * 2 * S);
  // an evaluation on the training cache keeps its layout (no new allocation around validation)
  const auto again = model.evaluate(batch, train_cache);
  CHECK(train_cache.backbone.acts.size() == train_elements);
  for (const auto* m : {&trained, &again}) {
    CHECK(std::memcmp(&m->L_total, &evaluated.L_total, sizeof(double)) == 0);
    CHECK(std::memcmp(&m->L_cls_mean, &evaluated.L_cls_mean, sizeof(double)) == 0);
    CHECK(std::memcmp(&m->L_reg_eff, &evaluated.L_reg_eff, sizeof(double)) == 0);
    CHECK(m->accuracy == evaluated.accuracy);
  }
}

TEST_CASE("a double model refuses bf16 products, with the sentence the linear products use") {
  ModelFixture f(cqtest::test_seed(43, "double model refuses bf16"));
  CHECK_THROWS_WITH_AS(f.model.set_precision(cq::linalg::Format::bf16),
                       "causalqwen::CausalQwen::set_precision: bf16 products serve float models only",
                       cq::DomainError);
  CHECK(f.model.precision() == cq::linalg::Format::f32);
  f.model.set_precision(cq::linalg::Format::f32);
}

TEST_CASE("a model refuses int8 as the precision of its products (a storage format of decoding's copies only)") {
  cq::model::CausalQwen<float, tiny> model(ModelFixture::settings());
  model.set_precision(cq::linalg::Format::bf16);
  CHECK_THROWS_WITH_AS(model.set_precision(cq::linalg::Format::int8),
                       "causalqwen::CausalQwen::set_precision: training products run in f32 or bf16, not int8",
                       cq::DomainError);
  CHECK(model.precision() == cq::linalg::Format::bf16);  // refused before anything changed
  CHECK(model.bf16_copy_bytes() > 0);
}

namespace {

/// Every field of two metrics, compared bit for bit (NaN included).
void check_same_bits(const cq::model::HeadMetrics& a, const cq::model::HeadMetrics& b) {
  const auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof(double)) == 0; };
  CHECK(same(a.L_cls_mean, b.L_cls_mean));
  CHECK(same(a.L_reg_eff, b.L_reg_eff));
  CHECK(same(a.L_total, b.L_total));
  CHECK(same(a.reg_mae, b.reg_mae));
  CHECK(same(a.units_mean_loc, b.units_mean_loc));
  CHECK(same(a.units_mean_scale, b.units_mean_scale));
  CHECK(same(a.ovr_prob_sum, b.ovr_prob_sum));
  CHECK(same(a.accuracy, b.accuracy));
  CHECK(same(a.num_accuracy, b.num_accuracy));
  CHECK(same(a.mean_P_num, b.mean_P_num));
  CHECK(a.valid_count == b.valid_count);
  CHECK(a.num_count == b.num_count);
}

/// evaluate(batch) and train_step(batch) on fresh caches, then evaluate on train_step's cache.
template <class Model, class Batch, class Noise>
void check_evaluate_is_train_steps_forward(Model& model, const Batch& batch, ActionMode mode, Noise noise) {
  typename Model::Cache eval_cache, train_cache;
  const auto evaluated = model.evaluate(batch, eval_cache, mode, noise);
  auto grads = model.make_gradients();
  const auto trained = model.train_step(batch, train_cache, grads, mode, noise);
  const auto again = model.evaluate(batch, train_cache, mode, noise);
  CHECK(std::isfinite(trained.L_total));
  CHECK(trained.valid_count > 0);
  CHECK(trained.num_count > 0);
  check_same_bits(trained, evaluated);
  check_same_bits(again, evaluated);
}

}  // namespace

TEST_CASE("evaluate is train_step's forward: the same metrics, bit for bit, in double and float") {
  for (auto mode : {ActionMode::deterministic, ActionMode::sampling}) {
    INFO("sampling: ", mode == ActionMode::sampling);
    ModelFixture f(cqtest::test_seed(65, "evaluate is the training forward"));
    check_evaluate_is_train_steps_forward(f.model, f.batch(), mode, f.noise(mode));

    cq::model::CausalQwen<float, tiny> model(ModelFixture::settings());
    model.init_random(cqtest::test_seed(66, "evaluate is the training forward, float"), 0.3);
    const std::vector<float> numeric(f.numeric.begin(), f.numeric.end()), targets(f.targets.begin(), f.targets.end()),
        uniform(f.uniform.begin(), f.uniform.end());
    const cq::model::Batch<float> batch{{f.ids.data(), {f.B, f.S}}, {numeric.data(), {f.B, f.S}}, {f.mask.data(), {f.B, f.S}},
                                        {f.labels.data(), {f.B, f.S}}, {targets.data(), {f.B, f.S}}, {}};
    const cq::model::SamplingNoise<float> noise =
        mode == ActionMode::deterministic ? cq::model::SamplingNoise<float>{}
                                          : cq::model::SamplingNoise<float>{0.7f, {uniform.data(), {f.B * f.S, tiny.causal_size}}};
    check_evaluate_is_train_steps_forward(model, batch, mode, noise);
  }
}

TEST_CASE("train_step refuses a gradient arena of another layout, naming itself") {
  ModelFixture f(cqtest::test_seed(67, "train_step layout"));
  typename decltype(f.model)::Cache cache;
  cq::Arena<double> wrong(std::make_shared<cq::Layout>());
  CHECK(cqtest::error_message<cq::DomainError>([&] { f.model.train_step(f.batch(), cache, wrong); }) ==
        "causalqwen::CausalQwen::train_step: the gradient arena does not have the model's layout");
}

TEST_CASE("the model's |W_cls| is a form of its store: handed out on request, made once per parameter version") {
  ModelFixture f(cqtest::test_seed(67, "model abs cls"));
  auto& model = f.model;
  const std::size_t K = tiny.num_classes, C = tiny.causal_size;
  CHECK(model.abs_bytes() == 0);  // nothing until asked for
  // decoding a few rows reads W once (the fused pass): no |W_cls| handed out, none made
  CHECK(model.head_params(1).action.cls_weight.abs.empty());
  CHECK(model.head_params(cq::linalg::fused_rows_max).action.cls_weight.abs.empty());
  CHECK(model.abs_bytes() == 0);
  // more rows, an evaluation: |W_cls| exactly, the same buffer while the parameters are current
  const auto abs = model.head_params(cq::linalg::fused_rows_max + 1).action.cls_weight.abs;
  const auto w = cq::TensorView<const double, 2>(model.params().view<2>(cq::model::names::cls_w));
  REQUIRE(abs.shape == cq::Shape<2>{K, C});
  bool exact = true;
  for (std::size_t i = 0; i < K * C; ++i) exact = exact && abs.data[i] == std::fabs(w.data[i]);
  CHECK(exact);
  CHECK(model.abs_bytes() == K * C * sizeof(double));
  CHECK(model.evaluation_head_params().action.cls_weight.abs.data == abs.data);
  typename decltype(f.model)::Cache cache;
  model.evaluate(f.batch(), cache);
  CHECK(model.abs_cls().data == abs.data);
  // a change of the parameters: the next request remakes it, in the same buffer
  for (auto& v : model.params().slot_span(cq::model::names::cls_w)) v = -v - 0.5;
  model.params().touch();
  const auto remade = model.abs_cls();
  CHECK(remade.data == abs.data);
  exact = true;
  for (std::size_t i = 0; i < K * C; ++i) exact = exact && remade.data[i] == std::fabs(w.data[i]);
  CHECK(exact);
  CHECK(model.abs_bytes() == K * C * sizeof(double));
}
