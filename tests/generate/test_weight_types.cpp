// bf16 and int8 weights for decoding (CausalQwen::use_weights): what they cost in accuracy
// against the float model on a fixed prompt set (max |Δloc_S|, |Δscale_S| and top-1 agreement
// over prefill and decoding steps), that a bf16 model's prefill gives the bits of the prompt fed
// a token at a time (on either bf16 kernel), and that changed parameters are refused until
// packed again.
#include "../support/test_support.hpp"

#include <causalqwen/generate/next_token.hpp>
#include <causalqwen/linalg/kernels/onednn_bf16.hpp>
#include <causalqwen/model.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;
namespace la = causalqwen::linalg;

namespace {

/// vocab 512 (K = 500), H = C = 64, F 160, 2 layers, 4 heads / 2 key-value heads.
cqm::CausalConfig small_config() {
  cqm::CausalConfig c;
  c.backbone = {512, 64, 160, 2, 4, 2, 1e-6, 1e4};
  c.causal_size = 64;
  c.num_classes = 500;
  c.num_token_id = 499;
  return c;
}

std::unique_ptr<cqm::CausalQwen<float>> copy_of(const cqm::CausalQwen<float>& m) {
  auto c = std::make_unique<cqm::CausalQwen<float>>(m.config());
  std::copy(m.params().data(), m.params().data() + m.params().size(), c->params().data());
  c->params().touch();
  return c;
}

/// What the head said at every step of one prompt: the prompt's prefill, then `steps` one-token
/// decoding steps fed with `feed` (the reference model's choices) or, when empty, its own.
struct Trace {
  std::vector<std::vector<float>> loc_S, scale_S;
  std::vector<std::int64_t> tokens;
};

Trace trace(const cqm::CausalQwen<float>& model, const std::vector<std::int64_t>& prompt, std::size_t steps,
            const std::vector<std::int64_t>& feed = {}) {
  const auto& cfg = model.config();
  const std::size_t H = cfg.hidden_size();
  typename cqm::CausalQwen<float>::InferenceState state;
  model.begin_inference(state, 1);
  cqg::NextTokenHead<float> head(cfg);
  cqg::DecodeSettings settings;  // deterministic
  Trace t;
  std::vector<std::int64_t> ids = prompt;
  for (std::size_t s = 0; s <= steps; ++s) {
    const auto z = model.forward_cached(cq::TensorView<const std::int64_t, 2>(ids.data(), {1, ids.size()}), {}, {}, {}, state);
    const std::size_t S = z.shape[1];
    cqg::StepDecision d;
    head.step(model.head_params(), cq::TensorView<const float, 2>(z.data + (S - 1) * H, {1, H}),
              settings, {}, std::span<cqg::StepDecision>(&d, 1));
    t.loc_S.push_back(head.loc_S());
    t.scale_S.push_back(head.scale_S());
    t.tokens.push_back(d.token);
    ids = {feed.empty() ? d.token : feed[s]};
  }
  return t;
}

/// The trace of `prompt` fed one token at a time and then continued with `whole`'s choices
/// (`whole`: the trace of the prompt prefilled at once, `steps` decoding steps): its decision t
/// for t ≥ prompt.size() − 1 is the one `whole` made at t − (prompt.size() − 1).
Trace token_at_a_time(const cqm::CausalQwen<float>& model, const std::vector<std::int64_t>& prompt, const Trace& whole,
                      std::size_t steps) {
  const std::vector<std::int64_t> first(prompt.begin(), prompt.begin() + 1);
  std::vector<std::int64_t> feed(prompt.begin() + 1, prompt.end());
  feed.insert(feed.end(), whole.tokens.begin(), whole.tokens.end());
  return trace(model, first, prompt.size() - 1 + steps, feed);
}

std::vector<std::vector<std::int64_t>> prompt_set(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> id(0, 498);
  std::vector<std::vector<std::int64_t>> prompts;
  for (std::size_t p = 0; p < 12; ++p) {
    std::vector<std::int64_t> ids(3 + p);
    for (auto& x : ids) x = id(rng);
    prompts.push_back(ids);
  }
  return prompts;
}

}  // namespace

TEST_CASE("bf16 and int8 weights against float on a fixed prompt set: bounded |Δloc_S|, |Δscale_S|, top-1 agreement") {
  const std::uint64_t seed = cqtest::test_seed(20261124, "weight types accuracy");
  cqm::CausalQwen<float> ref(small_config());
  ref.init_random(seed, 0.05);
  const auto prompts = prompt_set(seed);
  const std::size_t steps = 4;
  std::vector<Trace> expected;
  for (const auto& p : prompts) expected.push_back(trace(ref, p, steps));

  struct Bound {
    la::Format type;
    double loc, scale, agreement;  // max |Δloc_S| / max |loc_S|, the same for scale_S, min top-1 agreement
  };
  for (const Bound bound : {Bound{la::Format::bf16, 0.01, 0.002, 0.95}, Bound{la::Format::int8, 0.05, 0.01, 0.85}}) {
    CAPTURE(la::format_name(bound.type));
    auto model = copy_of(ref);
    model->use_weights(bound.type);
    CHECK(model->weight_type() == bound.type);
    double d_loc = 0, d_scale = 0, max_loc = 0, max_scale = 0;
    std::size_t agree = 0, decisions = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const auto got = trace(*model, prompts[i], steps, expected[i].tokens);
      for (std::size_t s = 0; s <= steps; ++s) {
        const auto &l0 = expected[i].loc_S[s], &s0 = expected[i].scale_S[s];
        for (std::size_t k = 0; k < l0.size(); ++k) {
          d_loc = std::max(d_loc, double(std::abs(got.loc_S[s][k] - l0[k])));
          d_scale = std::max(d_scale, double(std::abs(got.scale_S[s][k] - s0[k])));
          max_loc = std::max(max_loc, double(std::abs(l0[k])));
          max_scale = std::max(max_scale, double(s0[k]));
        }
        agree += got.tokens[s] == expected[i].tokens[s];
        ++decisions;
      }
    }
    const double agreement = double(agree) / double(decisions);
    MESSAGE(la::format_name(bound.type), ": max |dloc_S| ", d_loc, " (max |loc_S| ", max_loc, "), max |dscale_S| ",
            d_scale, " (max scale_S ", max_scale, "), top-1 agreement ", agree, "/", decisions);
    CHECK(d_loc > 0);  // the weights did change
    CHECK(d_loc <= bound.loc * max_loc);
    CHECK(d_scale <= bound.scale * max_scale);
    CHECK(agreement >= bound.agreement);
    CHECK(model->packed_bytes() > 0);
  }
}

TEST_CASE("a bf16 model: a prompt prefilled at once gives the bits of the prompt fed a token at a time, on either kernel") {
  // The bf16 product's rows do not depend on how many rows a call has, so a prefill of the whole
  // prompt and a prompt fed through the KV cache one token at a time agree bit for bit; and
  // AVX512-BF16 gives the portable loop's bits.
  const std::uint64_t seed = cqtest::test_seed(7, "bf16 prefill vs token at a time");
  cqm::CausalQwen<float> model(small_config());
  model.init_random(seed, 0.05);
  model.use_weights(la::Format::bf16);
  for (const auto& p : prompt_set(seed)) {
    const auto whole = trace(model, p, 3);
    // the same prompt one token at a time: the decisions after the last prompt token onwards
    const auto stepped = token_at_a_time(model, p, whole, 3);
    for (std::size_t s = 0; s < whole.loc_S.size(); ++s) {
      const std::size_t t = s + p.size() - 1;
      CHECK(whole.tokens[s] == stepped.tokens[t]);
      CHECK(whole.loc_S[s] == stepped.loc_S[t]);
      CHECK(whole.scale_S[s] == stepped.scale_S[t]);
    }
    la::set_bf16_kernel(la::Bf16Kernel::portable);
    const auto portable = trace(model, p, 3);
    la::set_bf16_kernel(la::Bf16Kernel::automatic);
    CHECK(portable.tokens == whole.tokens);
    for (std::size_t s = 0; s < whole.loc_S.size(); ++s) {
      CHECK(portable.loc_S[s] == whole.loc_S[s]);
      CHECK(portable.scale_S[s] == whole.scale_S[s]);
    }
  }
}

TEST_CASE("parameters changed after use_weights are refused until packed again; f32 drops the copies") {
  cqm::CausalQwen<float> model(small_config());
  model.init_random(3, 0.05);
  model.use_weights(la::Format::int8);
  const auto before = trace(model, {1, 2, 3}, 1);
  model.params().data()[0] += 1.0f;
  model.params().touch();
  CHECK_THROWS_WITH_AS(trace(model, {1, 2, 3}, 1), doctest::Contains("call use_weights again"), cq::DomainError);
  model.use_weights(la::Format::int8);
  CHECK_NOTHROW(trace(model, {1, 2, 3}, 1));
  model.use_weights(la::Format::f32);
  CHECK(model.packed_bytes() == 0);
  CHECK(trace(model, {1, 2, 3}, 1).tokens.size() == before.tokens.size());
  cqm::CausalQwen<double> wide(small_config());
  CHECK_THROWS_WITH_AS(wide.use_weights(la::Format::bf16), doctest::Contains("float models only"), cq::DomainError);
  CHECK(wide.weight_type() == la::Format::f32);  // refused before anything changed
}

TEST_CASE("oneDNN prefill (bf16 and int8 weights): a prompt prefilled at once against fed a token at a time, bounded and the same tokens") {
  // From linalg::onednn_min_rows rows on, prefill's products run on oneDNN (forced here, so that
  // this runs on every machine where oneDNN makes bf16 matmuls), whose sums run in another order
  // than our decoding kernels', and whose int8 product quantises X per row instead of per chunk
  // of 16: a
  // prompt prefilled at once no longer gives the bits of the prompt fed one token at a time
  // (each step one row, on our kernels). The difference is bounded here, and the tokens agree.
  if (!la::onednn_runs_bf16()) {
    MESSAGE(std::string(la::onednn_built_in() ? "oneDNN makes no bf16 matmul on this CPU (it needs AVX-512 or AMX): nothing runs on it"
                                   : "built without oneDNN: nothing runs on it"));
    return;
  }
  const std::uint64_t seed = cqtest::test_seed(8, "oneDNN prefill vs token at a time");
  cqm::CausalQwen<float> model(small_config());
  model.init_random(seed, 0.05);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> id(0, 498);
  la::set_bf16_kernel(la::Bf16Kernel::onednn);
  // bf16 weights: the formula of our kernels, another order of the float sums; a last-bit
  // difference in X can move its bf16 rounding by 2⁻⁹ in the next product, so the layers amplify
  // it (measured 2.0e-3 at seed 8). int8: decoding quantises X per chunk of 16, prefill rounds it
  // to bf16 (Q widened) or quantises it per row to s8: measured 1.7e-2 and 1.8e-2 (2.9e-2 on
  // other prompts), and a close top-1 may flip.
  struct Way {
    la::Format type;
    la::OnednnInt8 int8;
    double bound;
    std::size_t flips;  // tokens allowed to differ, of the 24
  };
  for (const Way& way : {Way{la::Format::bf16, la::OnednnInt8::bf16, 1e-2, 0}, Way{la::Format::int8, la::OnednnInt8::bf16, 6e-2, 2},
                         Way{la::Format::int8, la::OnednnInt8::s8, 6e-2, 2}}) {
    la::onednn_int8_prefill() = way.int8;
    model.use_weights(way.type);
    const std::string name = std::string(la::format_name(way.type)) + (way.type == la::Format::int8 && way.int8 == la::OnednnInt8::s8 ? " (X as s8)" : "");
    CAPTURE(name);
    double worst = 0;
    std::size_t flips = 0;
    for (std::size_t n = 0; n < 6; ++n) {
      std::vector<std::int64_t> p(la::onednn_min_rows + 4 + 5 * n);
      for (auto& x : p) x = id(rng);
      const auto whole = trace(model, p, 3);
      const auto stepped = token_at_a_time(model, p, whole, 3);
      for (std::size_t s = 0; s < whole.loc_S.size(); ++s) {
        const std::size_t t = s + p.size() - 1;
        flips += whole.tokens[s] != stepped.tokens[t];
        for (std::size_t k = 0; k < whole.loc_S[s].size(); ++k) {
          const double d = std::fabs(double(whole.loc_S[s][k]) - stepped.loc_S[t][k]) / (1 + std::fabs(double(stepped.loc_S[t][k])));
          const double ds = std::fabs(double(whole.scale_S[s][k]) - stepped.scale_S[t][k]) / (1 + std::fabs(double(stepped.scale_S[t][k])));
          worst = std::max({worst, d, ds});
        }
      }
    }
    MESSAGE(name << ": largest |Δloc_S|, |Δscale_S| / (1 + |value|) between prefill at once and a token at a time: " << worst
                 << "; tokens that differ: " << flips << " of 24");
    CHECK(worst <= way.bound);
    CHECK(flips <= way.flips);
  }
  la::onednn_int8_prefill() = la::OnednnInt8::s8;
  la::set_bf16_kernel(la::Bf16Kernel::automatic);
}
