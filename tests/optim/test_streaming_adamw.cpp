// optim/streaming_adamw.hpp: the step without a gradient arena equals AdamW + clip_grad_norm on
// a whole model (double: to 1e-10; the only differences are summation orders), with gradient
// accumulation, clipping that triggers and a frozen backbone, and on a slot of several tiles
// whose products are cut across them, beside directly written slots; tiles kept from the norm
// give the step the same bits as tiles formed again, and are not used once the parameters or the
// gradient changed; bfloat16 moments are
// reproducible bit for bit and stay close to the float update; the on-demand arena keeps
// unwritten pages out of memory.
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/parameter_rules.hpp>
#include <causalqwen/optim/adamw.hpp>
#include <causalqwen/optim/clip.hpp>
#include <causalqwen/optim/streaming_adamw.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <unistd.h>

#include "../support/test_support.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

namespace cq = causalqwen;
namespace co = causalqwen::optim;
namespace cqm = causalqwen::model;
using cqtest::test_seed;

namespace {

/// A tiny model (V 40, H 16, 2 layers, 4/2 heads, FFN 24, K 40, <NUM> = 39) and batches for it.
template <class T>
struct Setup {
  static cqm::CausalConfig config() {
    cqm::CausalConfig c;
    c.backbone = {40, 16, 24, 2, 4, 2, 1e-6, 1e4};
    c.causal_size = 16;
    c.num_classes = 40;
    c.num_token_id = 39;
    return c;
  }
  std::size_t B = 2, S = 7;
  std::vector<std::int64_t> ids, labels;
  std::vector<T> values, targets;

  /// Batch `k` (ids, a <NUM> at every third position, next-token labels, the last −100).
  cqm::Batch<T> batch(std::uint64_t seed, int k) {
    std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(k));
    ids.assign(B * S, 0), labels.assign(B * S, -100), values.assign(B * S, T(0)), targets.assign(B * S, T(0));
    for (std::size_t i = 0; i < B * S; ++i) {
      if (i % 3 == 1) ids[i] = 39, values[i] = static_cast<T>(static_cast<double>(rng() % 1000) / 10.0 - 20.0);
      else ids[i] = static_cast<std::int64_t>(rng() % 39);
    }
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t + 1 < S; ++t) labels[b * S + t] = ids[b * S + t + 1], targets[b * S + t] = values[b * S + t + 1];
    return {{ids.data(), {B, S}}, {values.data(), {B, S}}, {}, {labels.data(), {B, S}}, {targets.data(), {B, S}}, {}};
  }
};

/// Runs `steps` steps of both optimisers from the same start; checks norms and parameters.
template <class T>
void compare_with_adamw(std::uint64_t seed, int steps, int accumulation, double clip, cqm::ParameterOptions options, double tol) {
  Setup<T> data;
  cqm::CausalQwen<T> a(Setup<T>::config()), b(Setup<T>::config());
  const auto rules = cqm::parameter_rules(a.layout(), options);
  a.init_random(seed);
  b.init_random(seed);
  auto grads = a.make_gradients();
  co::AdamW<T> adam(a.params().shared_layout(), {}, rules);
  co::StreamingAdamW<T> streaming(b.params().shared_layout(), {}, rules);
  typename cqm::CausalQwen<T>::Cache cache_a, cache_b;
  for (int s = 0; s < steps; ++s) {
    grads.zero();
    for (int k = 0; k < accumulation; ++k) {
      const auto batch_a = data.batch(seed, s * accumulation + k);
      a.train_step(batch_a, cache_a, grads);
      const auto batch_b = data.batch(seed, s * accumulation + k);
      b.train_step(batch_b, cache_b, streaming.target());
    }
    const double norm_a = co::global_grad_norm(grads, rules), norm_b = streaming.grad_norm(b.params());
    CAPTURE(s);
    CHECK(cqtest::close_rel(norm_b, norm_a, tol));
    adam.step(a.params(), grads, 1e-2, co::clip_factor(norm_a, clip) / accumulation);
    streaming.step(b.params(), 1e-2, co::clip_factor(norm_b, clip) / accumulation);
    std::size_t bad = 0;
    for (const auto& slot : a.layout().slots())
      for (std::size_t i = 0; i < slot.size; ++i) {
        const double x = a.params().data()[slot.offset + i], y = b.params().data()[slot.offset + i];
        if (!cqtest::close_rel(y, x, tol, 1e-3)) {
          if (bad++ < 5) MESSAGE(slot.name, "[", i, "]: AdamW ", x, ", streaming ", y);
        }
      }
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("StreamingAdamW equals AdamW + clip_grad_norm on a whole model", T, float, double) {
  const auto seed = test_seed(41, "streaming-vs-adamw");
  const double tol = std::is_same_v<T, double> ? 1e-10 : 2e-4;
  SUBCASE("clipping triggers") { compare_with_adamw<T>(seed, 3, 1, 0.5, {}, tol); }
  SUBCASE("no clipping, gradient accumulation over 3 micro-batches") { compare_with_adamw<T>(seed, 2, 3, 0.0, {}, tol); }
  SUBCASE("frozen backbone") {
    compare_with_adamw<T>(seed, 2, 1, 1.0, {.freeze = cqm::Freeze::backbone}, tol);
  }
}

namespace {

/// big.weight [3000, 1024] spans two tiles of 2²¹ elements; its plain products cover rows
/// [0, 700), [700, 1900), [1900, 3000), a |W| product rows [500, 2500), and its last row is also
/// written directly (as the <NUM> row of W_cls is). small.weight has one product and shares its
/// first and last pages with directly written biases, whose zeros must not stop the Gram norm.
/// The same gradient lands in `reference` (a whole arena) and in `streaming` (as factors).
template <class T>
struct TiledSlots {
  static constexpr std::size_t K = 1024, M = 4;
  std::shared_ptr<cq::Layout> layout;
  cq::Arena<T> params_a, params_b, reference;
  co::AdamW<T> adam;
  co::StreamingAdamW<T> streaming;

  static std::shared_ptr<cq::Layout> make_layout() {
    auto l = std::make_shared<cq::Layout>();
    l->add("edge.bias", {300});
    l->add("big.weight", {3000, K});
    l->add("small.weight", {64, K});
    l->add("edge2.bias", {100});
    return l;
  }

  TiledSlots(std::uint64_t seed, std::size_t tile_cache_bytes)
      : layout(make_layout()), params_a(layout), params_b(layout), reference(layout), adam(layout), streaming(layout) {
    streaming.set_tile_cache_bytes(tile_cache_bytes);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    const auto random = [&](std::size_t n, double scale) {
      std::vector<T> v(n);
      for (auto& x : v) x = static_cast<T>(normal(rng) * scale);
      return v;
    };
    const auto start = random(params_a.size(), 0.1);
    std::copy(start.begin(), start.end(), params_a.data());
    std::copy(start.begin(), start.end(), params_b.data());
    const auto slot_rows = [&](cq::Arena<T>& arena, const char* name, std::size_t row0, std::size_t rows) {
      return cq::TensorView<T, 2>{arena.data() + layout->slot(name).offset + row0 * K, {rows, K}};
    };
    const auto x = random(M * K, 1.0);
    const cq::TensorView<const T, 2> x_view{x.data(), {M, K}};
    struct Cut {
      const char* slot;
      std::size_t row0, rows;
      bool abs;
    };
    for (const Cut cut : {Cut{"big.weight", 0, 700, false}, Cut{"big.weight", 700, 1200, false},
                          Cut{"big.weight", 1900, 1100, false}, Cut{"big.weight", 500, 2000, true},
                          Cut{"small.weight", 0, 64, false}}) {
      const auto dy = random(M * cut.rows, 1.0);
      const cq::TensorView<const T, 2> dy_view{dy.data(), {M, cut.rows}};
      const auto w = slot_rows(params_a, cut.slot, cut.row0, cut.rows);
      const cq::TensorView<const T, 2> w_view{w.data, w.shape};
      if (cut.abs) {
        cq::linalg::abs_linear_backward_weight<T>(slot_rows(reference, cut.slot, cut.row0, cut.rows), dy_view, x_view, w_view);
        cq::linalg::abs_linear_backward_weight<T>(slot_rows(streaming.gradients(), cut.slot, cut.row0, cut.rows), dy_view,
                                                  x_view, w_view, streaming.target().sink);
      } else {
        cq::linalg::linear_backward_weight<T>(slot_rows(reference, cut.slot, cut.row0, cut.rows), dy_view, x_view);
        cq::linalg::linear_backward_weight<T>(slot_rows(streaming.gradients(), cut.slot, cut.row0, cut.rows), dy_view, x_view,
                                              streaming.target().sink);
      }
    }
    // the gradients written directly: both biases and big.weight's last row
    for (const auto& [name, first, count] : {std::tuple{"edge.bias", std::size_t{0}, std::size_t{300}},
                                             std::tuple{"edge2.bias", std::size_t{0}, std::size_t{100}},
                                             std::tuple{"big.weight", 2999 * K, K}}) {
      const auto g = random(count, 1.0);
      for (auto* arena : {&reference, &streaming.gradients()})
        for (std::size_t i = 0; i < count; ++i) arena->data()[layout->slot(name).offset + first + i] += g[i];
    }
  }
};

}  // namespace

TEST_CASE_TEMPLATE("StreamingAdamW: a slot of several tiles with products cut across them, beside directly written slots",
                   T, float, double) {
  const auto seed = test_seed(53, "streaming-tiles");
  const double tol = std::is_same_v<T, double> ? 1e-10 : 2e-4;
  TiledSlots<T> c(seed, 0);
  CHECK(c.streaming.factor_bytes() > 0);
  const double norm_a = co::global_grad_norm(c.reference), norm_b = c.streaming.grad_norm(c.params_b);
  CHECK(cqtest::close_rel(norm_b, norm_a, tol));
  CHECK(co::clip_factor(norm_a, 0.5) < 1.0);  // clipping triggers
  c.adam.step(c.params_a, c.reference, 1e-2, co::clip_factor(norm_a, 0.5));
  c.streaming.step(c.params_b, 1e-2, co::clip_factor(norm_b, 0.5));
  std::size_t bad = 0;
  for (const auto& slot : c.layout->slots())
    for (std::size_t i = 0; i < slot.size; ++i) {
      const double a = c.params_a.data()[slot.offset + i], b = c.params_b.data()[slot.offset + i];
      if (!cqtest::close_rel(b, a, tol, 1e-3) && bad++ < 5) MESSAGE(slot.name, "[", i, "]: AdamW ", a, ", streaming ", b);
    }
  CHECK(bad == 0);
}

TEST_CASE_TEMPLATE("StreamingAdamW: tiles kept from the norm give the step the bits of tiles formed again", T, float, double) {
  // big.weight takes no Gram form (a |W| product, a row written directly); its tiles are
  // [0, 1900) and [1900, 3000) (2²¹ elements reach row 2048; the products' edge at 1900 ends the first).
  const auto seed = test_seed(59, "streaming-kept-tiles");
  constexpr std::size_t K = TiledSlots<T>::K, first_tile = 1900 * K, all = 3000 * K;
  // perturb: between grad_norm and the step, flip the sign of some of big.weight's parameters
  // (sign(W) enters its |W| product), as an optimiser-external change would
  const auto run = [&](std::size_t cache_bytes, bool perturb, std::size_t expect_kept) {
    TiledSlots<T> c(seed, cache_bytes);
    const double norm = c.streaming.grad_norm(c.params_b);
    CHECK(c.streaming.kept_tile_elements() == expect_kept);
    CHECK(c.streaming.tile_cache_held_bytes() <= cache_bytes);
    if (perturb) {
      T* w = c.params_b.data() + c.layout->slot("big.weight").offset;
      for (std::size_t i = 0; i < all; i += 7) w[i] = -w[i];
      c.params_b.touch();
    }
    c.streaming.step(c.params_b, 1e-2, co::clip_factor(norm, 0.5));
    return std::vector<T>(c.params_b.data(), c.params_b.data() + c.params_b.size());
  };
  const auto formed_twice = run(0, false, 0);
  for (const auto& [bytes, kept] : {std::pair{all * sizeof(T), all}, std::pair{(first_tile + 5) * sizeof(T), first_tile},
                                    std::pair{(first_tile - 1) * sizeof(T), all - first_tile}}) {  // the second only
    CAPTURE(bytes);
    const auto with_kept = run(bytes, false, kept);
    CHECK(std::memcmp(with_kept.data(), formed_twice.data(), formed_twice.size() * sizeof(T)) == 0);
  }
  // parameters changed after the norm: the kept tiles are not used
  const auto perturbed = run(0, true, 0), perturbed_kept = run(all * sizeof(T), true, all);
  CHECK(std::memcmp(perturbed.data(), formed_twice.data(), formed_twice.size() * sizeof(T)) != 0);
  CHECK(std::memcmp(perturbed_kept.data(), perturbed.data(), perturbed.size() * sizeof(T)) == 0);
}

TEST_CASE("StreamingAdamW with kept tiles: a whole model's steps unchanged, and a new gradient forgets them") {
  const auto seed = test_seed(61, "streaming-kept-model");
  auto run = [&](std::size_t cache_bytes) {
    Setup<float> data;
    cqm::CausalQwen<float> model(Setup<float>::config());
    model.init_random(seed);
    co::StreamingAdamW<float> opt(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()));
    opt.set_tile_cache_bytes(cache_bytes);
    typename cqm::CausalQwen<float>::Cache cache;
    for (int s = 0; s < 3; ++s) {
      model.train_step(data.batch(seed, 2 * s), cache, opt.target());
      const double norm = opt.grad_norm(model.params());
      if (cache_bytes) CHECK(opt.kept_tile_elements() > 0);  // W_cls: a |W| product and the <NUM> row
      // a second micro-batch after the norm (its gradient joins the step): the kept tiles are forgotten
      model.train_step(data.batch(seed, 2 * s + 1), cache, opt.target());
      CHECK(opt.kept_tile_elements() == 0);
      opt.step(model.params(), 1e-2, co::clip_factor(norm, 1.0));
    }
    return std::vector<float>(model.params().data(), model.params().data() + model.params().size());
  };
  const auto formed_twice = run(0), kept = run(std::size_t{1} << 20);
  CHECK(std::memcmp(kept.data(), formed_twice.data(), kept.size() * sizeof(float)) == 0);
}

TEST_CASE("StreamingAdamW keeps the weight gradients as factors, not in the arena") {
  const auto seed = test_seed(43, "streaming-factors");
  Setup<float> data;
  cqm::CausalQwen<float> model(Setup<float>::config());
  model.init_random(seed);
  co::StreamingAdamW<float> opt(model.params().shared_layout());
  typename cqm::CausalQwen<float>::Cache cache;
  {
    model.train_step(data.batch(seed, 0), cache, opt.target());
  }
  const auto& up = model.layout().slot("model.layers.1.mlp.up_proj.weight");
  const auto& cls = model.layout().slot("causal.action.cls.weight");
  // the products never touched these slots of the gradient arena (all zero) …
  for (std::size_t i = 0; i < up.size; ++i) REQUIRE(opt.gradients().data()[up.offset + i] == 0.0f);
  std::size_t nonzero_cls = 0;
  for (std::size_t i = 0; i < cls.size; ++i) nonzero_cls += opt.gradients().data()[cls.offset + i] != 0.0f;
  CHECK(nonzero_cls <= 16);  // … but the <NUM> row of W_cls, written directly by the gate's path
  CHECK(opt.factor_bytes() > 0);
  // a product aimed at another arena is declined (computed as usual)
  cq::Arena<float> other(model.params().shared_layout());
  {
    const std::vector<float> dy(2 * 3, 1.0f), x(2 * 4, 2.0f);
    std::vector<float> dw(3 * 4, 0.0f);
    cq::linalg::linear_backward_weight<float>({dw.data(), {3, 4}}, {dy.data(), {2, 3}}, {x.data(), {2, 4}}, opt.target().sink);
    CHECK(dw[0] == 4.0f);
  }
  opt.clear();
  CHECK(opt.factor_bytes() == 0);
  // cleared: every gradient 0
  const auto& g = opt.gradients();
  CHECK(std::all_of(g.data(), g.data() + g.size(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("bfloat16 moments: reproducible bit for bit and close to the float update") {
  const auto seed = test_seed(47, "streaming-bf16");
  auto run = [&](co::MomentStorage storage) {
    Setup<float> data;
    cqm::CausalQwen<float> model(Setup<float>::config());
    model.init_random(seed);
    co::StreamingAdamW<float> opt(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()), storage);
    typename cqm::CausalQwen<float>::Cache cache;
    std::vector<float> before(model.params().span().begin(), model.params().span().end());
    for (int s = 0; s < 4; ++s) {
      {
        model.train_step(data.batch(seed, s), cache, opt.target());
      }
      opt.step(model.params(), 1e-2, co::clip_factor(opt.grad_norm(model.params()), 1.0));
    }
    std::vector<float> delta(before.size());
    for (std::size_t i = 0; i < before.size(); ++i) delta[i] = model.params().data()[i] - before[i];
    return delta;
  };
  const auto bf16_a = run(co::MomentStorage::bf16), bf16_b = run(co::MomentStorage::bf16);
  const auto full = run(co::MomentStorage::full);
  REQUIRE(std::memcmp(bf16_a.data(), bf16_b.data(), bf16_a.size() * sizeof(float)) == 0);
  // the updates (4 steps of ≈ lr each) agree to the moments' 8-bit precision
  double err = 0, size = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    err += std::pow(static_cast<double>(bf16_a[i]) - full[i], 2);
    size += std::pow(static_cast<double>(full[i]), 2);
  }
  MESSAGE("relative RMS difference of the bf16-moment updates: ", std::sqrt(err / size));
  CHECK(std::sqrt(err / size) < 0.02);
  CHECK(std::sqrt(err / size) > 0.0);  // the storage really differs
}

TEST_CASE("an on-demand arena keeps unwritten pages out of memory and zero() keeps the written ones") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a", {1 << 20});
  layout->add("b", {1 << 20});
  cq::Arena<float> arena(layout, cq::ArenaMemory::on_demand);
  const auto& b = layout->slot("b");
  CHECK(arena.untouched(0, arena.size()));
  arena.data()[b.offset + 5] = 1.0f;
  CHECK(arena.untouched(0, 1 << 19));
  CHECK(!arena.untouched(b.offset, b.size));
  CHECK(arena.data()[b.offset + 4] == 0.0f);
  arena.zero();
  CHECK(arena.data()[b.offset + 5] == 0.0f);
  CHECK(arena.untouched(0, 1 << 19));       // never written: still no page
  CHECK(!arena.untouched(b.offset, b.size));  // written: its page stays, now holding 0
  cq::Arena<float> filled(layout);
  CHECK(!filled.untouched(0, 16));
  // the written runs: the page holding b[5] (1024 floats of 4 KiB pages), clipped to the range asked
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  const auto collect = [&](std::size_t begin, std::size_t end) { runs.emplace_back(begin, end); };
  arena.for_each_written_run(0, arena.size(), collect);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) / sizeof(float);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].first == b.offset);
  CHECK(runs[0].second == b.offset + page);
  runs.clear();
  arena.for_each_written_run(b.offset + 3, 10, collect);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0] == std::pair<std::size_t, std::size_t>(b.offset + 3, b.offset + 13));
  runs.clear();
  arena.for_each_written_run(0, b.offset, collect);  // slot a: never written
  CHECK(runs.empty());
  CHECK(arena.untouched(b.offset + page, b.size - page));  // listing the runs read nothing
  runs.clear();
  filled.for_each_written_run(7, 9, collect);  // a filled arena: the whole range
  REQUIRE(runs.size() == 1);
  CHECK(runs[0] == std::pair<std::size_t, std::size_t>(7, 16));
}
