// RoPE (pinned NEOX values) and causal grouped-query attention (padding, grouping, gradients).
#include "grad_harness.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/nn.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
using cq::TensorView;
using cqtest::randn;

namespace {
constexpr std::size_t B = 2, S = 5, NH = 4, NKV = 2, D = 2;  // H = 8
// row 0 right-padded, row 1 left-padded (its first two queries see no key at all)
const std::vector<std::int64_t> kMask = {1, 1, 1, 1, 0, 0, 0, 1, 1, 1};
const std::vector<std::int64_t> kPositions = {0, 1, 2, 3, 4, 1, 1, 0, 1, 2};
}  // namespace

TEST_CASE("RoPE is the NEOX rotate-half convention (hand-computed values)") {
  // D = 4, θ = 1e4, position 1: inv_freq = (1, 0.01), angles (1, 0.01); x = (1, 2, 3, 4).
  //   y0 = x0·cos1 − x2·sin1,  y1 = x1·cos.01 − x3·sin.01,
  //   y2 = x2·cos1 + x0·sin1,  y3 = x3·cos.01 + x1·sin.01
  nn::RotaryEmbedding<double> rope{4, 1e4};
  std::vector<std::int64_t> pos = {1, 0};
  nn::RotaryEmbedding<double>::Table table;
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {2}), table);
  std::vector<double> x = {1, 2, 3, 4, 1, 2, 3, 4};  // two rows (positions 1 and 0), one head
  rope.rotate(x.data(), 4, 0, 1, table);
  const double neox[4] = {-1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994};
  const double gptj[4] = {-1.1426396637476532, 1.922075596544176, 2.9598506679133294, 4.029799501669161};
  double from_gptj = 0;
  for (int j = 0; j < 4; ++j) {
    CHECK(x[j] == doctest::Approx(neox[j]).epsilon(1e-15));
    from_gptj = std::max(from_gptj, std::abs(x[j] - gptj[j]));
    CHECK(x[4 + j] == double(j + 1));  // position 0 is the identity
  }
  CHECK(from_gptj > 0.5);  // the interleaved GPT-J pairing is told apart
  // the inverse rotation (backward) undoes it
  rope.rotate(x.data(), 4, 0, 1, table, -1);
  for (int j = 0; j < 4; ++j) CHECK(x[j] == doctest::Approx(j + 1).epsilon(1e-15));
}

TEST_CASE("RoPE with Qwen2's θ = 1e6: angle of the last pair at position 100") {
  // D = 64: a_31 = 100·1e6^(−62/64), checked through y_31 = −x_63·sin a_31 for x = e_63.
  nn::RotaryEmbedding<double> rope{64, 1e6};
  std::vector<std::int64_t> pos = {100};
  nn::RotaryEmbedding<double>::Table table;
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {1}), table);
  std::vector<double> x(64, 0.0);
  x[63] = 1.0;
  rope.rotate(x.data(), 64, 0, 1, table);
  const double a = 100.0 * std::pow(1e6, -62.0 / 64.0);
  CHECK(x[31] == doctest::Approx(-std::sin(a)).epsilon(1e-14));
  CHECK(x[63] == doctest::Approx(std::cos(a)).epsilon(1e-14));
}

TEST_CASE("RoPE table: kept for the same positions, rebuilt for new positions or a new θ") {
  nn::RotaryEmbedding<float> rope{8, 1e4};
  nn::RotaryEmbedding<float>::Table table;
  std::vector<std::int64_t> pos = {0, 1, 2, 3};
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {4}), table);
  const auto fresh = [&](const nn::RotaryEmbedding<float>& r, const std::vector<std::int64_t>& p) {
    nn::RotaryEmbedding<float>::Table t;
    r.build(TensorView<const std::int64_t, 1>(p.data(), {p.size()}), t);
    return t;
  };
  table.cos[0] = 7.0f;  // a mark: a kept table still holds it
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {4}), table);
  CHECK(table.cos[0] == 7.0f);
  pos[3] = 9;  // one position changed: rebuilt, equal to a fresh table
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {4}), table);
  CHECK(table.cos == fresh(rope, pos).cos);
  CHECK(table.sin == fresh(rope, pos).sin);
  const nn::RotaryEmbedding<float> other{8, 1e6};  // same positions, another θ
  other.build(TensorView<const std::int64_t, 1>(pos.data(), {4}), table);
  CHECK(table.sin == fresh(other, pos).sin);
  CHECK(table.sin != fresh(rope, pos).sin);
  pos.push_back(4);  // more rows
  rope.build(TensorView<const std::int64_t, 1>(pos.data(), {5}), table);
  CHECK(table.rows == 5);
  CHECK(table.cos == fresh(rope, pos).cos);
}

TEST_CASE("attention: padded keys get zero weight; a query with no visible key outputs 0") {
  const std::uint64_t seed = 11;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  nn::CausalSelfAttention<double> attn{NH, NKV, D};
  const std::size_t Q = attn.qkv_width();
  auto qkv = randn(B * S * Q, rng);
  std::vector<double> out(B * S * NH * D), probs(B * NH * S * S);
  nn::CausalSelfAttention<double>::Cache c;
  nn::CausalSelfAttention<double>::Workspace ws;
  c.probs = TensorView<double, 5>(probs.data(), attn.probs_shape(B, S));
  attn.forward(TensorView<const double, 3>(qkv.data(), {B, S, Q}), TensorView<const std::int64_t, 2>(kMask.data(), {B, S}),
               TensorView<double, 3>(out.data(), {B, S, NH * D}), c, ws);
  for (std::size_t h = 0; h < NH; ++h) {
    for (std::size_t i = 0; i < S; ++i) {
      double row0 = 0, row1 = 0;
      for (std::size_t j = 0; j < S; ++j) {
        const double p0 = c.prob(0, h, i, j), p1 = c.prob(1, h, i, j);
        if (j > i || j == 4) CHECK(p0 == 0.0);  // future or padded key
        if (j > i || j < 2) CHECK(p1 == 0.0);
        row0 += p0, row1 += p1;
      }
      CHECK(row0 == doctest::Approx(1.0));
      CHECK(row1 == doctest::Approx(i < 2 ? 0.0 : 1.0));
    }
    for (std::size_t d = 0; d < D; ++d) CHECK(out[(1 * S + 0) * NH * D + h * D + d] == 0.0);
  }
}

TEST_CASE("GQA: query head h reads KV head h / (NH/NKV) — equals MHA on repeat_kv'd keys, not on tiled ones") {
  const std::uint64_t seed = 12;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  nn::CausalSelfAttention<double> gqa{NH, NKV, D}, mha{NH, NH, D};
  const std::size_t Q = gqa.qkv_width(), Q4 = mha.qkv_width();
  auto qkv = randn(B * S * Q, rng);
  // expand: grouped (repeat_kv: kv head of query head h is h / 2) and tiled (h % 2)
  std::vector<double> grouped(B * S * Q4), tiled(B * S * Q4);
  for (std::size_t m = 0; m < B * S; ++m) {
    const double* src = qkv.data() + m * Q;
    for (std::size_t d = 0; d < NH * D; ++d) grouped[m * Q4 + d] = tiled[m * Q4 + d] = src[d];
    for (std::size_t h = 0; h < NH; ++h)
      for (std::size_t part = 0; part < 2; ++part)  // k, v
        for (std::size_t d = 0; d < D; ++d) {
          const std::size_t dst = m * Q4 + NH * D + part * NH * D + h * D + d;
          grouped[dst] = src[NH * D + part * NKV * D + (h / 2) * D + d];
          tiled[dst] = src[NH * D + part * NKV * D + (h % 2) * D + d];
        }
  }
  auto run = [&](nn::CausalSelfAttention<double>& a, std::vector<double>& in, std::size_t width) {
    std::vector<double> out(B * S * NH * D), probs(B * NH * S * S);
    nn::CausalSelfAttention<double>::Cache c;
    nn::CausalSelfAttention<double>::Workspace ws;
    c.probs = TensorView<double, 5>(probs.data(), a.probs_shape(B, S));
    a.forward(TensorView<const double, 3>(in.data(), {B, S, width}), {}, TensorView<double, 3>(out.data(), {B, S, NH * D}), c, ws);
    return out;
  };
  auto o_gqa = run(gqa, qkv, Q), o_grouped = run(mha, grouped, Q4), o_tiled = run(mha, tiled, Q4);
  double diff_tiled = 0;
  for (std::size_t i = 0; i < o_gqa.size(); ++i) {
    CHECK(o_gqa[i] == doctest::Approx(o_grouped[i]).epsilon(1e-14));
    diff_tiled = std::max(diff_tiled, std::abs(o_gqa[i] - o_tiled[i]));
  }
  CHECK(diff_tiled > 1e-3);
}

TEST_CASE("attention + RoPE gradients with padding (B=2, S=5, 4 query / 2 KV heads)") {
  const std::uint64_t seed = 13;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  nn::CausalSelfAttention<double> attn{NH, NKV, D};
  nn::RotaryEmbedding<double> rope{D, 1e6};
  const std::size_t Q = attn.qkv_width();
  nn::RotaryEmbedding<double>::Table table;
  rope.build(TensorView<const std::int64_t, 1>(kPositions.data(), {B * S}), table);
  auto qkv = randn(B * S * Q, rng), r = randn(B * S * NH * D, rng);
  std::vector<double> rotated(qkv.size()), out(B * S * NH * D), probs(B * NH * S * S), dqkv(qkv.size());
  nn::CausalSelfAttention<double>::Cache c;
  nn::CausalSelfAttention<double>::Workspace ws;
  c.probs = TensorView<double, 5>(probs.data(), attn.probs_shape(B, S));
  for (bool masked : {true, false}) {
    CAPTURE(masked);
    const TensorView<const std::int64_t, 2> mask =
        masked ? TensorView<const std::int64_t, 2>(kMask.data(), {B, S}) : TensorView<const std::int64_t, 2>{};
    auto loss = [&] {
      rotated = qkv;
      rope.rotate(rotated.data(), Q, 0, NH, table);
      rope.rotate(rotated.data(), Q, NH * D, NKV, table);
      attn.forward(TensorView<const double, 3>(rotated.data(), {B, S, Q}), mask,
                   TensorView<double, 3>(out.data(), {B, S, NH * D}), c, ws);
      return cqtest::dot(r, out);
    };
    loss();
    std::fill(dqkv.begin(), dqkv.end(), 0.0);
    attn.backward(c, TensorView<const double, 3>(r.data(), {B, S, NH * D}), TensorView<double, 3>(dqkv.data(), {B, S, Q}), ws);
    rope.rotate(dqkv.data(), Q, 0, NH, table, -1);
    rope.rotate(dqkv.data(), Q, NH * D, NKV, table, -1);
    cqtest::check_gradients({{"qkv", qkv, dqkv}}, loss);
  }
}

TEST_CASE("attention across several 64-token query blocks (S=150): naive loop and gradients agree") {
  const std::uint64_t seed = 14;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t b = 1, s = 150, nh = 6, nkv = 2, d = 4;
  nn::CausalSelfAttention<double> attn{nh, nkv, d};
  const std::size_t Q = attn.qkv_width();
  std::vector<std::int64_t> mask(s, 1);
  for (std::size_t j : {0, 1, 2, 70, 149}) mask[j] = 0;  // left padding and two holes
  auto qkv = randn(b * s * Q, rng), r = randn(b * s * nh * d, rng);
  std::vector<double> out(b * s * nh * d), probs(b * nh * s * s), dqkv(qkv.size(), 0.0);
  nn::CausalSelfAttention<double>::Cache c;
  nn::CausalSelfAttention<double>::Workspace ws;
  c.probs = TensorView<double, 5>(probs.data(), attn.probs_shape(b, s));
  auto loss = [&] {
    attn.forward(TensorView<const double, 3>(qkv.data(), {b, s, Q}), TensorView<const std::int64_t, 2>(mask.data(), {b, s}),
                 TensorView<double, 3>(out.data(), {b, s, nh * d}), c, ws);
    return cqtest::dot(r, out);
  };
  loss();
  // naive: per head, per query, softmax over visible keys
  for (std::size_t h = 0; h < nh; ++h)
    for (std::size_t i = 0; i < s; ++i) {
      const std::size_t kvh = h / (nh / nkv);
      std::vector<double> sc;
      double mx = -1e300;
      for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::size_t e = 0; e < d; ++e) dot += qkv[i * Q + h * d + e] * qkv[j * Q + nh * d + kvh * d + e];
        sc.push_back(mask[j] ? dot / std::sqrt(double(d)) : -INFINITY);
        if (mask[j]) mx = std::max(mx, sc.back());
      }
      double z = 0;
      for (auto& v : sc) z += (v = std::exp(v - mx));
      for (std::size_t e = 0; e < d; ++e) {
        double o = 0;
        for (std::size_t j = 0; j <= i; ++j) o += (z > 0 ? sc[j] / z : 0.0) * qkv[j * Q + nh * d + nkv * d + kvh * d + e];
        CHECK(out[i * nh * d + h * d + e] == doctest::Approx(o).epsilon(1e-12));
      }
    }
  attn.backward(c, TensorView<const double, 3>(r.data(), {b, s, nh * d}), TensorView<double, 3>(dqkv.data(), {b, s, Q}), ws);
  cq::autodiff::GradCheckOptions options;
  options.max_coordinates = 300;
  cqtest::check_gradients({{"qkv", qkv, dqkv}}, loss, options);
}

TEST_CASE("float attention: P has the bits of the scalar softmax over the same scores; a prompt through the KV path gives the same output") {
  // Scores of the float product are one fused multiply-add chain over the head's dimensions (its
  // documented order), so the test forms them alike; then: ·1/√D, the maximum over the visible
  // keys, e^{x − max} (exp_float has std::exp's bits), the sum in key order, and ·(1/sum). The
  // block-by-block softmax (16 rows side by side, lane-wise maxima) must give these bits exactly.
  const std::uint64_t seed = cqtest::test_seed(20261126, "attention_softmax_bits");
  std::mt19937_64 rng(seed);
  const std::size_t s = 150, nh = 6, nkv = 2, d = 16, G = nh / nkv;
  nn::CausalSelfAttention<float> attn{nh, nkv, d};
  const std::size_t Q = attn.qkv_width();
  // with padding and holes (the mask read for every key), and with every key visible (the mask
  // skipped, the scores scaled and their maximum taken in one vector pass)
  for (const bool holes : {true, false}) {
    CAPTURE(holes);
    std::vector<std::int64_t> mask(s, 1);
    if (holes)
      for (std::size_t j : {0, 1, 2, 70, 149}) mask[j] = 0;  // left padding and two holes
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> qkv(s * Q);
    for (auto& v : qkv) v = normal(rng);
    std::vector<float> out(s * nh * d), probs(nh * s * s);
    nn::CausalSelfAttention<float>::Cache c;
    nn::CausalSelfAttention<float>::Workspace ws;
    c.probs = TensorView<float, 5>(probs.data(), attn.probs_shape(1, s));
    attn.forward(TensorView<const float, 3>(qkv.data(), {1, s, Q}), TensorView<const std::int64_t, 2>(mask.data(), {1, s}),
                 TensorView<float, 3>(out.data(), {1, s, nh * d}), c, ws);
    const float scale = 1.0f / std::sqrt(float(d));
    std::size_t differ = 0;
    for (std::size_t h = 0; h < nh; ++h)
      for (std::size_t i = 0; i < s; ++i) {
        const std::size_t kvh = h / G;
        std::vector<float> x(i + 1);
        float mx = -INFINITY;
        for (std::size_t j = 0; j <= i; ++j) {
          float dot = 0.0f;
          for (std::size_t e = 0; e < d; ++e) dot = std::fma(qkv[i * Q + h * d + e], qkv[j * Q + nh * d + kvh * d + e], dot);
          x[j] = dot * scale;
          if (mask[j]) mx = std::max(mx, x[j]);
        }
        float sum = 0.0f;
        for (std::size_t j = 0; j <= i; ++j) sum += (x[j] = mask[j] ? std::exp(x[j] - mx) : 0.0f);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (std::size_t j = 0; j < s; ++j) {
          const float p = j <= i ? x[j] * inv : 0.0f;
          differ += std::bit_cast<std::uint32_t>(p) != std::bit_cast<std::uint32_t>(c.prob(0, h, i, j));
        }
      }
    INFO("seed ", seed);
    CHECK(differ == 0);

    // the same prompt through the decoding path (its keys into a KV cache, P one block at a time)
    nn::KvCache<float> kv;
    kv.reset(1, 1, nkv, d);
    kv.make_room(s);
    std::copy(mask.begin(), mask.end(), kv.mask.begin());
    std::vector<float> out_cached(s * nh * d);
    attn.forward_cached(0, qkv.data(), 1, s, kv, out_cached.data(), ws);
    std::size_t out_differ = 0;
    for (std::size_t e = 0; e < out.size(); ++e)
      out_differ += std::bit_cast<std::uint32_t>(out[e]) != std::bit_cast<std::uint32_t>(out_cached[e]);
    CHECK(out_differ == 0);
  }
}

TEST_CASE("bf16 attention: near the exact attention, the same bits fed at once or a token at a time, on every kernel") {
  // bf16_products rounds q, k, P and v to bf16 and sums the exact products in float, each sum in
  // an order fixed by the head size (Q·Kᵀ) or by the keys (P·V), so that a prompt gives the same
  // bits in one call as through the KV cache a token at a time, whichever bf16 kernel runs; the
  // cache then holds its keys and values in bf16 (rounded once, as the products round them), and
  // gives the same bits whether it grows step by step, was reserved, or was filled in float first.
  namespace la = causalqwen::linalg;
  const std::uint64_t seed = cqtest::test_seed(20261128, "bf16_attention");
  std::mt19937_64 rng(seed);
  const std::size_t s = 150, nh = 6, nkv = 2, d = 64, G = nh / nkv;  // three 64-token query blocks
  nn::CausalSelfAttention<float> attn{nh, nkv, d};
  const std::size_t Q = attn.qkv_width();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(s * Q);
  for (auto& v : qkv) v = normal(rng);
  for (const bool holes : {false, true}) {
    CAPTURE(holes);
    std::vector<std::int64_t> mask(s, 1);
    if (holes)
      for (std::size_t j : {0, 1, 2, 70, 149}) mask[j] = 0;  // left padding and two holes
    nn::CausalSelfAttention<float>::Workspace ws;
    // the whole prompt at once (keys through the cache), or `step` tokens per call; `reserved`:
    // the cache sized for the prompt first (else it grows as the tokens come); `float_until`: the
    // tokens before it through float products and a float cache, which then turns to bf16
    const auto run = [&](bool bf16, std::size_t step, bool reserved = true, std::size_t float_until = 0) {
      nn::KvCache<float> kv;
      kv.use_storage(bf16 && float_until == 0 ? nn::KvStorage::bf16 : nn::KvStorage::f32);
      kv.reset(1, 1, nkv, d, reserved ? s : 0);
      std::vector<float> out(s * nh * d);
      for (std::size_t t0 = 0; t0 < s; t0 += step) {
        const std::size_t n = std::min(step, s - t0);
        if (bf16 && t0 == float_until) kv.use_storage(nn::KvStorage::bf16);
        attn.bf16_products = bf16 && t0 >= float_until;
        kv.make_room(n);
        std::copy_n(mask.begin() + t0, n, kv.mask.begin() + t0);
        attn.forward_cached(0, qkv.data() + t0 * Q, 1, n, kv, out.data() + t0 * nh * d, ws);
        kv.length += n;
      }
      if (bf16) CHECK(kv.bytes() == 2 * nkv * kv.capacity * d * 2 + kv.capacity * 8);  // half a float cache's keys and values
      return out;
    };
    const auto bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      std::size_t differ = 0;
      for (std::size_t e = 0; e < a.size(); ++e) differ += std::bit_cast<std::uint32_t>(a[e]) != std::bit_cast<std::uint32_t>(b[e]);
      return differ;
    };
    const auto whole = run(true, s), as_float = run(false, s);
    CHECK(bits(whole, run(true, 1)) == 0);          // a token at a time
    CHECK(bits(whole, run(true, 37)) == 0);         // blocks that straddle the 64-token query blocks
    CHECK(bits(whole, run(true, 1, false)) == 0);   // the cache growing (its keys moved within their panels)
    CHECK(bits(whole, run(true, 37, false)) == 0);
    {  // the first 74 tokens in float (a float cache, turned to bf16 then): the tokens after them as before
      const auto turned = run(true, 37, true, 74);
      CHECK(bits(std::vector<float>(whole.begin() + 74 * nh * d, whole.end()),
                 std::vector<float>(turned.begin() + 74 * nh * d, turned.end())) == 0);
    }
    {  // the prompt without a cache (its keys and values in panels of the workspace)
      attn.bf16_products = true;
      std::vector<float> out(s * nh * d);
      nn::CausalSelfAttention<float>::Cache c;
      attn.forward(TensorView<const float, 3>(qkv.data(), {1, s, Q}), TensorView<const std::int64_t, 2>(mask.data(), {1, s}),
                   TensorView<float, 3>(out.data(), {1, s, nh * d}), c, ws);
      CHECK(bits(whole, out) == 0);
    }
    {  // a cache whose storage does not match the products is refused, naming both
      attn.bf16_products = true;
      nn::KvCache<float> kv;
      kv.reset(1, 1, nkv, d, s);
      std::vector<float> out(nh * d);
      CHECK_THROWS_WITH(attn.forward_cached(0, qkv.data(), 1, 1, kv, out.data(), ws),
                        doctest::Contains("the cache stores float keys and values but the products run in bf16"));
    }
    for (const auto kernel : {la::Bf16Kernel::avx2, la::Bf16Kernel::portable}) {
      la::set_bf16_kernel(kernel);
      const auto other = run(true, s);
      la::set_bf16_kernel(la::Bf16Kernel::automatic);
      CHECK(bits(whole, other) == 0);
    }
    // against the exact attention (double) over the float inputs: within bf16's rounding
    double worst = 0, worst_float = 0, v_max = 0;
    for (std::size_t h = 0; h < nh; ++h)
      for (std::size_t i = 0; i < s; ++i) {
        const std::size_t kvh = h / G;
        std::vector<double> p(i + 1, 0.0);
        double mx = -INFINITY, z = 0;
        for (std::size_t j = 0; j <= i; ++j) {
          if (!mask[j]) continue;
          double dot = 0;
          for (std::size_t e = 0; e < d; ++e) dot += double(qkv[i * Q + h * d + e]) * qkv[j * Q + nh * d + kvh * d + e];
          p[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, p[j]);
        }
        for (std::size_t j = 0; j <= i; ++j) z += (p[j] = mask[j] ? std::exp(p[j] - mx) : 0.0);
        for (std::size_t e = 0; e < d; ++e) {
          double o = 0;
          for (std::size_t j = 0; j <= i; ++j) {
            const double v = qkv[j * Q + nh * d + nkv * d + kvh * d + e];
            o += z > 0 ? p[j] / z * v : 0.0;
            v_max = std::max(v_max, std::abs(v));
          }
          const std::size_t at = i * nh * d + h * d + e;
          worst = std::max(worst, std::abs(whole[at] - o));
          worst_float = std::max(worst_float, std::abs(as_float[at] - o));
        }
      }
    MESSAGE("holes ", holes, ": max |out - exact| bf16 ", worst, ", float ", worst_float, " (max |v| ", v_max, ")");
    CHECK(worst > worst_float);  // the products did run in bf16
    CHECK(worst <= 0.01 * v_max);
    CHECK(worst_float <= 1e-5 * v_max);
  }
}
