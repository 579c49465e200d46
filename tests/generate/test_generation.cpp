// The generation loop and the four modes: the cache changes nothing (tokens and numbers equal
// to recomputing from scratch), a row does not depend on its batch, each mode's first step is
// the head's forward (deterministic, sampling) or a hand computation (causal, compatible) for
// the same noise, <NUM>'s number reaches the next embedding, EOS and hooks stop rows, ids ≥ K
// are never emitted, and with a freshly converted base Qwen2 checkpoint compatible greedy
// decoding is the base model's greedy decoding.
#include "../support/qwen2_stack.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/text/labels.hpp>
#include <causalqwen/checkpoint/model_checkpoint.hpp>
#include <causalqwen/generate/generator.hpp>

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <limits>
#include <fstream>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;
namespace fs = std::filesystem;

namespace {

/// vocab 40 (K = 34 classes: ids 34…39 are padded rows), H 16, <NUM> = 33.
cqm::CausalConfig tiny_config() {
  cqm::CausalConfig c;
  c.backbone = {40, 16, 24, 2, 4, 2, 1e-6, 1e4};
  c.causal_size = 16;
  c.num_classes = 34;
  c.num_token_id = 33;
  c.ovr_threshold = {0.5};
  c.gamma_init = 1.0;
  return c;
}

/// A random model whose <NUM> is chosen now and then and whose regression head is not tiny.
template <class T>
std::unique_ptr<cqm::CausalQwen<T>> tiny_model(std::uint64_t seed) {
  auto m = std::make_unique<cqm::CausalQwen<T>>(tiny_config());
  m->init_random(seed, 0.3);
  auto& p = m->params();
  std::mt19937_64 rng(seed + 99);
  std::normal_distribution<double> n(0.0, 1.0);
  for (auto& w : p.slot_span(cqm::names::reg_w)) w = static_cast<T>(3 * n(rng));
  for (auto& w : p.slot_span(cqm::names::abd_scale_w)) w = static_cast<T>(0.2 * n(rng));
  for (auto& w : p.slot_span(cqm::names::cls_w)) w = static_cast<T>(n(rng));
  p.slot_span(cqm::names::cls_b)[33] = T(1.5);  // <NUM> gets chosen at times
  p.touch();
  return m;
}

std::vector<cqg::PromptInput> prompts(std::uint64_t seed) {
  return {{{1, 2, 3, 33, 4}, {0, 0, 0, 12.5, 0}, cqg::row_seed(seed, 0)},
          {{5}, {}, cqg::row_seed(seed, 1)},
          {{7, 8, 9, 10, 11, 12, 13, 14}, {}, cqg::row_seed(seed, 2)}};
}

const cqg::GenerationMode all_modes[] = {cqg::GenerationMode::deterministic, cqg::GenerationMode::sampling,
                                         cqg::GenerationMode::causal, cqg::GenerationMode::compatible};

cqg::GenerationOptions options(cqg::GenerationMode mode, std::size_t n = 12) {
  cqg::GenerationOptions o;
  o.decode.mode = mode;
  o.decode.temperature = mode == cqg::GenerationMode::compatible ? 0.8 : 1.0;
  o.decode.top_k = 10;
  o.decode.top_p = 0.9;
  o.max_new_tokens = n;
  return o;
}

void check_same(const cqg::GenerationResult& a, const cqg::GenerationResult& b, double tol) {
  REQUIRE(a.tokens.size() == b.tokens.size());
  CHECK(a.stop == b.stop);
  for (std::size_t i = 0; i < a.tokens.size(); ++i) {
    INFO("step ", i);
    CHECK(a.tokens[i].id == b.tokens[i].id);
    CHECK(cqtest::close_rel(a.tokens[i].value, b.tokens[i].value, tol));
    CHECK(cqtest::close_rel(a.tokens[i].scale, b.tokens[i].scale, tol));
    CHECK(cqtest::close_rel(a.tokens[i].p_num, b.tokens[i].p_num, tol));
  }
}

}  // namespace

TEST_CASE_TEMPLATE("Generator::run refuses max_new_tokens that would wrap or pass the limit", T, float, double) {
  // P + max_new_tokens must not wrap (SIZE_MAX, or -1 read into a size_t): refused with a
  // DomainError before any buffer is sized.
  cqm::CausalQwen<T> model(tiny_config());
  model.init_random(7, 0.3);
  const std::vector<cqg::PromptInput> prompts = {{{1, 2, 3}, {}, cqg::row_seed(7, 0)}};
  for (const std::size_t n : {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() - 2,
                              std::size_t{1} << 40, cqg::max_new_tokens_limit + 1}) {
    CAPTURE(n);
    cqg::GenerationOptions opts;
    opts.max_new_tokens = n;
    CHECK_THROWS_WITH_AS((void)cqg::Generator<T>(model).run(prompts, opts),
                         doctest::Contains("exceeds the limit of 1048576 tokens"), causalqwen::DomainError);
  }
}

TEST_CASE_TEMPLATE("the KV cache gives the tokens and numbers of recomputation, every mode, both paddings", T, float, double) {
  const auto seed = cqtest::test_seed(71, "generation cache vs no cache");
  auto model = tiny_model<T>(seed);
  const auto ps = prompts(seed);
  std::size_t nums = 0;
  for (auto mode : all_modes)
    for (auto pad : {cq::PaddingSide::left, cq::PaddingSide::right})
      for (bool shared : {false, true}) {
        INFO(cqg::mode_name(mode), pad == cq::PaddingSide::left ? " left" : " right", shared ? " shared noise" : "");
        auto o = options(mode);
        o.padding = pad;
        o.decode.shared_noise = shared;
        const auto cached = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
        o.use_cache = false;
        const auto fresh = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
        for (std::size_t b = 0; b < ps.size(); ++b) {
          check_same(cached[b], fresh[b], 0);  // --no-cache: identical, bit for bit
          for (const auto& t : cached[b].tokens) nums += t.id == 33;
        }
      }
  MESSAGE("<NUM> generated ", nums, " times");
  CHECK(nums > 0);  // so the numbers fed back are exercised too
}

TEST_CASE("a row's continuation does not depend on its batch, padding side or position in it") {
  const auto seed = cqtest::test_seed(72, "generation per-row determinism");
  auto model = tiny_model<double>(seed);
  const auto ps = prompts(seed);
  for (auto mode : all_modes) {
    INFO(cqg::mode_name(mode));
    auto o = options(mode);
    o.padding = cq::PaddingSide::left;
    const auto together = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
    for (std::size_t b = 0; b < ps.size(); ++b) {
      const auto alone = cqg::generate(*model, std::span<const cqg::PromptInput>(&ps[b], 1), o);
      check_same(alone[0], together[b], 1e-9);
    }
    // reversed order, right padding
    std::vector<cqg::PromptInput> rev(ps.rbegin(), ps.rend());
    o.padding = cq::PaddingSide::right;
    const auto reversed = cqg::generate(*model, std::span<const cqg::PromptInput>(rev), o);
    for (std::size_t b = 0; b < ps.size(); ++b) check_same(reversed[ps.size() - 1 - b], together[b], 1e-9);
    // a different seed changes the noisy modes
    if (mode == cqg::GenerationMode::sampling || mode == cqg::GenerationMode::causal) {
      auto other = ps;
      for (auto& p : other) p.seed += 1000;
      const auto changed = cqg::generate(*model, std::span<const cqg::PromptInput>(other), o);
      bool differs = false;
      for (std::size_t b = 0; b < ps.size(); ++b)
        for (std::size_t i = 0; i < changed[b].tokens.size(); ++i)
          differs |= changed[b].tokens[i].id != together[b].tokens[i].id;
      CHECK(differs);
    }
  }
}

TEST_CASE("each mode's first step: the head's forward (deterministic, sampling) or a hand computation") {
  const auto seed = cqtest::test_seed(73, "generation first step");
  auto model = tiny_model<double>(seed);
  const auto& cfg = model->config();
  const std::size_t C = cfg.causal_size, K = cfg.num_classes;
  const cqg::PromptInput prompt{{3, 1, 4, 33, 5, 9}, {0, 0, 0, -7.25, 0, 0}, 12345};
  const std::size_t S = prompt.ids.size(), last = S - 1;
  std::vector<std::int64_t> labels(S, cq::ignore_index);
  const cqm::Batch<double> batch{{prompt.ids.data(), {1, S}}, {prompt.values.data(), {1, S}}, {},
                                 {labels.data(), {1, S}}, {}, {}};
  // the row's step-0 uniforms, as the generator draws them
  std::vector<double> u(S * C, 0.5);
  const cqg::RowStream stream{prompt.seed};
  for (std::size_t j = 0; j < C; ++j) u[last * C + j] = stream.uniform(cqg::NoiseTag::action, 0, j);
  const auto hp = cqm::HeadParams<const double>::bind(std::as_const(*model).params());
  for (auto mode : {cqg::GenerationMode::deterministic, cqg::GenerationMode::sampling}) {
    INFO(cqg::mode_name(mode));
    auto o = options(mode, 1);
    o.decode.temperature = 0.7;
    const auto got = cqg::generate(*model, std::span<const cqg::PromptInput>(&prompt, 1), o)[0].tokens.at(0);
    typename cqm::CausalQwen<double>::Cache cache;
    const bool sampling = mode == cqg::GenerationMode::sampling;
    model->evaluate(batch, cache, sampling ? cqm::ActionMode::sampling : cqm::ActionMode::deterministic,
                    {0.7, sampling ? cq::TensorView<const double, 2>(u.data(), {S, C}) : cq::TensorView<const double, 2>{}});
    CHECK(got.id == cache.head.ovr.pred[last]);
    CHECK(cqtest::close_rel(got.p_num, cache.head.regression.P_num[last], 1e-10, 1e-12));
    CHECK(cqtest::close_rel(got.value, cache.head.regression.loc_Y[last], 1e-10));
    CHECK(cqtest::close_rel(got.scale, cache.head.regression.scale_Y[last], 1e-10));
  }
  // causal and compatible by hand from the head's loc_U, scale_U
  typename cqm::CausalQwen<double>::Cache cache;
  model->evaluate(batch, cache);
  const double* loc_U = cache.head.abduction.loc_U.data() + last * C;
  const double* scale_U = cache.head.abduction.scale_U.data() + last * C;
  std::vector<double> uvec(C);
  for (std::size_t j = 0; j < C; ++j) uvec[j] = loc_U[j] + scale_U[j] * std::tan(M_PI * (u[last * C + j] - 0.5));
  std::int64_t best = -1, best_loc = -1;
  double best_s = -1e300, best_l = -1e300;
  for (std::size_t k = 0; k < K; ++k) {
    double s = hp.action.cls_bias[k], l = hp.action.cls_bias[k];
    for (std::size_t j = 0; j < C; ++j) {
      s += hp.action.cls_weight.values(k, j) * uvec[j];
      l += hp.action.cls_weight.values(k, j) * loc_U[j];
    }
    if (s > best_s) best_s = s, best = static_cast<std::int64_t>(k);
    if (l > best_l) best_l = l, best_loc = static_cast<std::int64_t>(k);
  }
  double y = hp.action.reg_bias[0];
  for (std::size_t j = 0; j < C; ++j) y += hp.action.reg_weight.values(0, j) * uvec[j];
  const auto causal = cqg::generate(*model, std::span<const cqg::PromptInput>(&prompt, 1),
                                    options(cqg::GenerationMode::causal, 1))[0].tokens.at(0);
  CHECK(causal.id == best);
  CHECK(cqtest::close_rel(causal.value, y, 1e-10));
  auto greedy = options(cqg::GenerationMode::compatible, 1);
  greedy.decode.temperature = 0;
  const auto compat = cqg::generate(*model, std::span<const cqg::PromptInput>(&prompt, 1), greedy)[0].tokens.at(0);
  CHECK(compat.id == best_loc);
  CHECK(cqtest::close_rel(compat.value, cache.head.regression.loc_Y[last], 1e-10));
}

TEST_CASE("sampling at T = 0 is the noiseless decision; shared noise repeats one individual") {
  const auto seed = cqtest::test_seed(74, "generation T=0");
  auto model = tiny_model<double>(seed);
  const auto ps = prompts(seed);
  auto o = options(cqg::GenerationMode::sampling);
  o.decode.temperature = 0;
  const auto a = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
  auto other = ps;
  for (auto& p : other) p.seed ^= 0xabcdef;
  const auto b = cqg::generate(*model, std::span<const cqg::PromptInput>(other), o);
  for (std::size_t r = 0; r < ps.size(); ++r) check_same(a[r], b[r], 0);  // no noise at all
  // compatible with top_k = 1 is greedy, whatever the temperature
  auto k1 = options(cqg::GenerationMode::compatible);
  k1.decode.top_k = 1;
  auto greedy = k1;
  greedy.decode.temperature = 0;
  const auto c1 = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), k1);
  const auto c0 = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), greedy);
  for (std::size_t r = 0; r < ps.size(); ++r)
    for (std::size_t i = 0; i < c0[r].tokens.size(); ++i) CHECK(c1[r].tokens[i].id == c0[r].tokens[i].id);
}

TEST_CASE("<NUM>'s number is fed back: changing it changes what follows") {
  const auto seed = cqtest::test_seed(75, "generation number feedback");
  auto model = tiny_model<double>(seed);
  // force <NUM> first: a huge bias, then compare two regression biases
  auto& p = model->params();
  const double saved = p.slot_span(cqm::names::cls_b)[33];
  auto o = options(cqg::GenerationMode::deterministic, 6);
  const cqg::PromptInput prompt{{1, 2, 3}, {}, 1};
  p.slot_span(cqm::names::cls_b)[33] = 1e6;
  p.touch();
  auto first = cqg::generate(*model, std::span<const cqg::PromptInput>(&prompt, 1), options(cqg::GenerationMode::deterministic, 1));
  REQUIRE(first[0].tokens[0].id == 33);
  p.slot_span(cqm::names::cls_b)[33] = saved;
  p.touch();
  // generate with a prompt that ends in <NUM> with two different values: the next z differs
  cqg::PromptInput a{{1, 2, 3, 33}, {0, 0, 0, 1.0}, 1}, b{{1, 2, 3, 33}, {0, 0, 0, 1e6}, 1};
  const auto ra = cqg::generate(*model, std::span<const cqg::PromptInput>(&a, 1), o);
  const auto rb = cqg::generate(*model, std::span<const cqg::PromptInput>(&b, 1), o);
  CHECK(ra[0].tokens[0].value != rb[0].tokens[0].value);
}

TEST_CASE("EOS and the hook stop a row; max_new_tokens bounds it; ids >= K never appear") {
  const auto seed = cqtest::test_seed(76, "generation stops");
  auto model = tiny_model<double>(seed);
  const auto ps = prompts(seed);
  auto o = options(cqg::GenerationMode::deterministic, 10);
  const auto free_run = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
  // EOS = the third token row 0 emits: row 0 stops right after it, the others go on
  const auto eos = free_run[0].tokens.at(2).id;
  o.eos_ids = {eos};
  const auto stopped = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o);
  for (std::size_t b = 0; b < ps.size(); ++b) {
    std::size_t first = free_run[b].tokens.size();
    for (std::size_t i = 0; i < free_run[b].tokens.size(); ++i)
      if (free_run[b].tokens[i].id == eos) {
        first = i;
        break;
      }
    const std::size_t expected = first < free_run[b].tokens.size() ? first + 1 : free_run[b].tokens.size();
    CHECK(stopped[b].tokens.size() == expected);
    CHECK(stopped[b].stop == (first < free_run[b].tokens.size() ? cqg::StopReason::eos : cqg::StopReason::length));
    for (std::size_t i = 0; i < stopped[b].tokens.size(); ++i) CHECK(stopped[b].tokens[i].id == free_run[b].tokens[i].id);
  }
  CHECK(stopped[0].tokens.size() <= 3);
  // a hook stopping row 1 after 4 tokens
  o.eos_ids.clear();
  const auto hooked = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), o,
                                    [](std::size_t row, const cqg::GenerationResult& r) { return row == 1 && r.tokens.size() == 4; });
  CHECK(hooked[1].tokens.size() == 4);
  CHECK(hooked[1].stop == cqg::StopReason::hook);
  CHECK(hooked[0].tokens.size() == 10);
  // ids 34…39 are embedding rows but not classes: never emitted, in any mode (the converted-base
  // test below also makes such rows win the base model's argmax)
  for (auto mode : all_modes) {
    auto om = options(mode, 30);
    const auto r = cqg::generate(*model, std::span<const cqg::PromptInput>(ps), om);
    for (const auto& row : r)
      for (const auto& t : row.tokens) CHECK(t.id < 34);
  }
}

namespace {

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("causalqwen_gen_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("compatible greedy after converting a base Qwen2 checkpoint = the base model's greedy") {
  const auto seed = cqtest::test_seed(77, "compatible greedy = base greedy");
  // a base Qwen2: vocab 48, tied embeddings; rows 40…47 are padding (K = 40, <NUM> = 39)
  cq::nn::TransformerConfig bc{48, 16, 24, 2, 4, 2, 1e-6, 1e4};
  cqtest::Qwen2Stack<float> base(bc);
  base.init_random(seed, 0.3);
  auto E = base.param<2>("model.embed_tokens.weight");
  for (std::size_t k = 40; k < 48; ++k)  // padded rows: 10× copies of rows 0…7, so they often win over all 48
    for (std::size_t j = 0; j < 16; ++j) E(k, j) = 10 * E(k - 40, j);
  const auto dir = scratch("base");
  {
    cq::format::SafetensorsWriter w;
    for (const auto& slot : base.params().layout().slots()) {
      if (slot.name.rfind("causal.", 0) == 0) continue;
      w.add(slot.name, slot.shape, std::span<const float>(base.params().data() + slot.offset, slot.size));
    }
    w.write(dir / "model.safetensors");
    nlohmann::json j = {{"model_type", "qwen2"}, {"vocab_size", 48}, {"hidden_size", 16}, {"intermediate_size", 24},
                        {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                        {"rms_norm_eps", 1e-6}, {"rope_theta", 1e4}, {"tie_word_embeddings", true}};
    std::ofstream(dir / "config.json") << j.dump(2);
  }
  auto loaded = cq::checkpoint::load_model<float>(dir, {.num_token_id = 39});
  REQUIRE(loaded.converted);
  REQUIRE(loaded.model->config().num_classes == 40);
  const std::vector<std::vector<std::int64_t>> prompts_ids = {{3, 17, 5, 22}, {8}, {30, 2, 2, 11, 6, 1, 25}};
  std::vector<cqg::PromptInput> ps;
  for (std::size_t i = 0; i < prompts_ids.size(); ++i) ps.push_back({prompts_ids[i], {}, i});
  const std::size_t N = 16;
  std::size_t padded_wins = 0;
  for (auto pad : {cq::PaddingSide::left, cq::PaddingSide::right}) {
    auto o = options(cqg::GenerationMode::compatible, N);
    o.decode.temperature = 0;
    o.padding = pad;
    const auto ours = cqg::generate(*loaded.model, std::span<const cqg::PromptInput>(ps), o);
    for (std::size_t b = 0; b < ps.size(); ++b) {
      // the base model's greedy decoding, one row at a time, recomputing: logits = z·Eᵀ over ids < K
      std::vector<std::int64_t> seq = ps[b].ids;
      std::vector<std::int64_t> base_tokens;
      bool padded_would_win = false;
      for (std::size_t t = 0; t < N; ++t) {
        cqtest::Qwen2Stack<float>::Cache c;
        const auto z = base.forward({seq.data(), {1, seq.size()}}, {}, {}, {}, c);
        const float* zl = z.data + (seq.size() - 1) * 16;
        std::int64_t best = -1, best_all = -1;
        float bv = -1e30f, bv_all = -1e30f;
        for (std::size_t k = 0; k < 48; ++k) {
          float logit = 0;
          for (std::size_t j = 0; j < 16; ++j) logit += zl[j] * E(k, j);
          if (k < 40 && logit > bv) bv = logit, best = static_cast<std::int64_t>(k);
          if (logit > bv_all) bv_all = logit, best_all = static_cast<std::int64_t>(k);
        }
        padded_would_win |= best_all >= 40;
        padded_wins += best_all >= 40;
        base_tokens.push_back(best);
        seq.push_back(best);
      }
      INFO("row ", b, pad == cq::PaddingSide::left ? " left" : " right", " padded ids would win somewhere: ", padded_would_win);
      REQUIRE(ours[b].tokens.size() == N);
      for (std::size_t t = 0; t < N; ++t) {
        CHECK(ours[b].tokens[t].id == base_tokens[t]);
        CHECK(ours[b].tokens[t].id != 39);  // <NUM> (whose number the base model would not see) never came up
      }
    }
  }
  CHECK(padded_wins > 0);  // over all rows ≥ K the base argmax would have emitted a padded id
  fs::remove_all(dir);
}
