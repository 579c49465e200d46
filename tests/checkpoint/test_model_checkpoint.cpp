// CausalQwen checkpoints: save → load is exact; a base Qwen2 checkpoint (tied or untied) is
// converted with the heads' inits (W_loc = I, W_scale = 0, W_cls = lm_head), after which loc_S equals the base model's logits and
// scale_U = γ_init everywhere; bad checkpoints give errors naming the file and the problem.
#include "../support/test_support.hpp"

#include <causalqwen/checkpoint/model_checkpoint.hpp>

#include <filesystem>
#include <fstream>

namespace cq = causalqwen;
namespace fs = std::filesystem;

namespace {

constexpr cq::model::StaticConfig tiny{.vocab_size = 13, .hidden_size = 8, .intermediate_size = 12, .num_layers = 2, .num_heads = 4,
    .num_kv_heads = 2, .causal_size = 8, .num_classes = 12, .num_token_id = 11};

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("causalqwen_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Writes the backbone of `m` as a base Qwen2 checkpoint: no causal.* tensor, no CausalQwen key.
void write_base(const fs::path& dir, const cq::model::CausalQwen<float>& m, bool tied, std::vector<float>* lm_head = nullptr,
                const std::string& skip = "", const std::string& extra = "") {
  cq::format::SafetensorsWriter w;
  std::deque<std::vector<float>> keep;
  for (const auto& slot : m.layout().slots()) {
    if (slot.name.rfind("causal.", 0) == 0 || slot.name == skip) continue;
    w.add(slot.name, slot.shape, std::span<const float>(m.params().data() + slot.offset, slot.size));
  }
  if (!tied) w.add("lm_head.weight", {13, 8}, std::span<const float>(*lm_head));
  if (!extra.empty()) {
    keep.emplace_back(4, 1.0f);
    w.add(extra, {4}, std::span<const float>(keep.back()));
  }
  w.write(dir / "model.safetensors");
  nlohmann::json j = {{"model_type", "qwen2"}, {"vocab_size", 13}, {"hidden_size", 8}, {"intermediate_size", 12},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 1e6}, {"tie_word_embeddings", tied}, {"max_position_embeddings", 64}};
  std::ofstream(dir / "config.json") << j.dump(2);
}

struct TinyBatch {
  std::vector<std::int64_t> ids{1, 5, 7, 2, 3, 9}, mask{1, 1, 1, 1, 1, 1}, labels{5, 7, 2, 3, 9, -100};
  cq::model::Batch<float> view() const { return {{ids.data(), {2, 3}}, {}, {mask.data(), {2, 3}}, {labels.data(), {2, 3}}, {}, {}}; }
};

}  // namespace

TEST_CASE("save then load gives back every tensor exactly, and config.json's settings") {
  auto cfg = tiny.runtime();
  cfg.ovr_threshold = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  cfg.alpha_gate = 0.25;
  cq::model::CausalQwen<float> m(cfg);
  m.init_random(cqtest::test_seed(5, "checkpoint round trip"));
  const auto dir = scratch("roundtrip");
  cq::checkpoint::save_model(dir, m);
  const auto loaded = cq::checkpoint::load_model<float>(dir);
  CHECK_FALSE(loaded.converted);
  CHECK(loaded.model->config().alpha_gate == 0.25);
  CHECK(loaded.model->config().ovr_threshold.size() == 12);
  const auto a = m.params().span(), b = loaded.model->params().span();
  REQUIRE(a.size() == b.size());
  CHECK(std::equal(a.begin(), a.end(), b.begin()));
  // no temporary file is left behind
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string()[0] != '.');
  fs::remove_all(dir);
}

TEST_CASE("the regression head's reading round-trips through config.json") {
  for (auto head : {cq::model::RegHead::gaussian, cq::model::RegHead::mse}) {
    auto cfg = tiny.runtime();
    cfg.reg_head = head;
    cq::model::CausalQwen<float> m(cfg);
    m.init_random(cqtest::test_seed(5, "reg head round trip"));
    const auto dir = scratch("reghead");
    cq::checkpoint::save_model(dir, m);
    CHECK(cq::checkpoint::load_model<float>(dir).model->config().reg_head == head);
    fs::remove_all(dir);
  }
}

TEST_CASE("a tied base Qwen2 checkpoint converts: loc_S = base logits, scale_U = γ_init, W_loc = I") {
  cq::model::CausalQwen<float> base(tiny.runtime());
  base.init_random(cqtest::test_seed(6, "tied conversion"), 0.2);
  const auto dir = scratch("tied");
  write_base(dir, base, true);
  cq::checkpoint::LoadOptions opt;
  opt.num_token_id = 11;
  auto loaded = cq::checkpoint::load_model<float>(dir, opt);
  CHECK(loaded.converted);
  auto& m = *loaded.model;
  CHECK(m.config().num_classes == 12);  // num_token_id + 1
  typename cq::model::CausalQwen<float>::Cache cache;
  TinyBatch batch;
  m.evaluate(batch.view(), cache);
  const cq::Arena<float>& p = m.params();
  const auto full = m.head().full_vocabulary(m.evaluation_head_params(), cache.head);
  const auto embed = p.view<2>("model.embed_tokens.weight");
  const auto z = cache.backbone.z;
  for (std::size_t r = 0; r < 6; ++r)
    for (std::size_t k = 0; k < 12; ++k) {
      double logit = 0;  // the base model's logit: z · E_k (tied lm_head)
      for (std::size_t j = 0; j < 8; ++j) logit += double(z(r, j)) * embed(k, j);
      CHECK(full.loc_S[r * 12 + k] == doctest::Approx(logit).epsilon(1e-5));
    }
  for (auto s : cache.head.abduction.scale_U) CHECK(s == doctest::Approx(10.0f).epsilon(1e-6));
  const auto wl = p.view<2>("causal.abduction.loc.weight");
  CHECK(wl(3, 3) == 1.0f);
  CHECK(wl(3, 4) == 0.0f);
  double norm = 0;
  for (auto v : p.view<1>("causal.num_direction")) norm += double(v) * v;
  CHECK(norm == doctest::Approx(1.0).epsilon(1e-6));
  // and it saves as a complete CausalQwen checkpoint
  const auto out = scratch("tied_out");
  cq::checkpoint::save_model(out, m, loaded.config_json);
  CHECK_FALSE(cq::checkpoint::load_model<float>(out).converted);
  fs::remove_all(dir);
  fs::remove_all(out);
}

TEST_CASE("an untied base: W_cls = lm_head's first K rows, lm_head carried through save") {
  cq::model::CausalQwen<float> base(tiny.runtime());
  base.init_random(7, 0.2);
  std::vector<float> lm_head(13 * 8);
  for (std::size_t i = 0; i < lm_head.size(); ++i) lm_head[i] = 0.01f * static_cast<float>(i) - 0.3f;
  const auto dir = scratch("untied");
  write_base(dir, base, false, &lm_head);
  cq::checkpoint::LoadOptions opt;
  opt.num_token_id = 11;
  auto loaded = cq::checkpoint::load_model<float>(dir, opt);
  const auto cls = loaded.model->params().slot_span("causal.action.cls.weight");
  CHECK(std::equal(cls.begin(), cls.end(), lm_head.begin()));
  const auto out = scratch("untied_out");
  cq::checkpoint::save_model(out, *loaded.model, loaded.config_json, loaded.lm_head);
  const auto back = cq::checkpoint::load_model<float>(out);
  CHECK(back.lm_head == lm_head);
  fs::remove_all(dir);
  fs::remove_all(out);
}

TEST_CASE("bad checkpoints: clear errors naming the file and the problem") {
  cq::model::CausalQwen<float> base(tiny.runtime());
  base.init_random(8);
  cq::checkpoint::LoadOptions opt;
  opt.num_token_id = 11;
  auto error = [&](const fs::path& dir, cq::checkpoint::LoadOptions o) {
    return cqtest::error_message<cq::FormatError>([&] { cq::checkpoint::load_model<float>(dir, o); });
  };
  const auto dir = scratch("bad");
  SUBCASE("a missing tensor") {
    write_base(dir, base, true, nullptr, "model.layers.1.mlp.up_proj.weight");
    CHECK(error(dir, opt).find("missing") != std::string::npos);
    CHECK(error(dir, opt).find("model.layers.1.mlp.up_proj.weight") != std::string::npos);
  }
  SUBCASE("an extra tensor") {
    write_base(dir, base, true, nullptr, "", "model.layers.7.surprise");
    CHECK(error(dir, opt) == dir.string() + ": tensors the model does not have: model.layers.7.surprise");
  }
  SUBCASE("a shape that contradicts config.json") {
    write_base(dir, base, true);
    auto j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    j["intermediate_size"] = 16;
    std::ofstream(dir / "config.json") << j.dump();
    const auto e = error(dir, opt);
    CHECK(e.find("model.layers.0.mlp.gate_proj.weight' has shape [12,8], expected [16,8]") != std::string::npos);
  }
  SUBCASE("config values out of range") {
    write_base(dir, base, true);
    auto j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    j["num_attention_heads"] = 3;
    std::ofstream(dir / "config.json") << j.dump();
    CHECK(error(dir, opt) == (dir / "config.json").string() +
                                 ": causalqwen::config: hidden_size 8 is not divisible by num_attention_heads 3");
    j["num_attention_heads"] = "four";
    std::ofstream(dir / "config.json") << j.dump();
    CHECK(error(dir, opt) == (dir / "config.json").string() + ": field 'num_attention_heads' must be an integer in [1, 4096], got \"four\"");
  }
  SUBCASE("no <NUM> id for a base checkpoint") {
    write_base(dir, base, true);
    CHECK(error(dir, {}).find("field 'num_token_id' is missing") != std::string::npos);
  }
  SUBCASE("lm_head.weight in a tied checkpoint") {
    std::vector<float> lm(13 * 8, 0.0f);
    write_base(dir, base, false, &lm);
    auto j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    j["tie_word_embeddings"] = true;
    std::ofstream(dir / "config.json") << j.dump();
    CHECK(error(dir, opt).find("lm_head.weight in a checkpoint whose config.json says tie_word_embeddings = true") != std::string::npos);
  }
  fs::remove_all(dir);
}
