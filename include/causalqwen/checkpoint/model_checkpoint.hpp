/// CausalQwen checkpoints on disk (Hugging Face Qwen2 tensor names plus `causal.*`): a directory
/// with config.json and model.safetensors (or shards with model.safetensors.index.json).
///
/// load_model reads a complete CausalQwen checkpoint, or converts a base Qwen2 checkpoint (no
/// `causal.*` tensor) with the heads' initialisation: W_loc = I, b_loc = 0, W_scale = 0,
/// b_scale = softplus⁻¹(γ_init), W_cls = the base lm_head's first K rows (the tied embedding
/// when tie_word_embeddings), b_cls = 0, w_reg Xavier(gain 0.01), b_reg = reg_bias_init,
/// b_noise = b_noise_init, thresholds from config, and the numeric direction a random unit
/// vector; LoadOptions::conversion overrides config.json's head settings for a conversion (a
/// fine-tuning recipe: threshold, α, regression gain and bias). `causal.ovr_threshold`, when
/// present, is authoritative. An untied base's
/// `lm_head.weight` is carried along unchanged and written back on save.
/// save_model writes config.json and model.safetensors atomically (an untied model created
/// here, with no base lm_head to carry, writes its embed_tokens as lm_head.weight).
#pragma once
#include "causalqwen/checkpoint/model_config.hpp"
#include "causalqwen/format/expected_tensors.hpp"
#include "causalqwen/format/safetensors_checkpoint.hpp"
#include "causalqwen/format/safetensors_writer.hpp"
#include "causalqwen/model/causal_qwen.hpp"

#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace causalqwen::checkpoint {

/// A model read from disk, with what is needed to write it back faithfully.
template <class T>
struct LoadedModel {
  std::unique_ptr<model::CausalQwen<T>> model;
  bool converted = false;            // true when a base Qwen2 checkpoint was converted
  nlohmann::json config_json;        // the file's keys, kept on save
  // config.json's max_position_embeddings, or default_max_position_embeddings when it states none
  std::optional<std::size_t> max_position_embeddings;
  bool max_position_embeddings_stated = false;  // whether config.json states it
  std::vector<float> lm_head;        // [V,H] of an untied base, empty when tied
  std::vector<std::size_t> lm_head_shape;
};

/// Head settings that replace config.json's when a base checkpoint is converted (none: the file's,
/// or the defaults). A CausalQwen checkpoint's heads are trained already: they do not apply there.
struct ConversionSettings {
  std::optional<std::vector<double>> ovr_threshold;  // one value, or K
  std::optional<double> alpha_gate, reg_init_gain, reg_bias_init, gamma_init, b_noise_init;
  std::optional<model::RegHead> reg_head;  // how the regression head is read (model/regression_head.hpp)

  bool any() const {
    return ovr_threshold || alpha_gate || reg_init_gain || reg_bias_init || gamma_init || b_noise_init || reg_head;
  }
  void apply(model::CausalConfig& c) const {
    if (ovr_threshold) c.ovr_threshold = *ovr_threshold;
    if (alpha_gate) c.alpha_gate = *alpha_gate;
    if (reg_init_gain) c.reg_init_gain = *reg_init_gain;
    if (reg_bias_init) c.reg_bias_init = *reg_bias_init;
    if (gamma_init) c.gamma_init = *gamma_init;
    if (b_noise_init) c.b_noise_init = *b_noise_init;
    if (reg_head) c.reg_head = *reg_head;
  }
};

struct LoadOptions {
  std::optional<std::int64_t> num_token_id;  // <NUM>'s id when config.json has none
  ConversionSettings conversion{};           // applied only when a base checkpoint is converted
  std::uint64_t seed = 20261121;             // for the conversion's random inits
  std::size_t class_chunk = 2048;
};

namespace detail_checkpoint {
inline bool is_causal(const std::string& name) { return name.rfind("causal.", 0) == 0; }
}  // namespace detail_checkpoint

/// Loads the checkpoint in `dir` (see the file comment). FormatError names the file and what is
/// wrong: config.json problems, missing or extra tensors, shapes that contradict config.json.
template <class T>
LoadedModel<T> load_model(const std::filesystem::path& dir, const LoadOptions& options = {}) {
  auto cfg_file = read_config_json(dir / "config.json", options.num_token_id);
  LoadedModel<T> out;
  out.config_json = cfg_file.json;
  out.max_position_embeddings_stated = cfg_file.max_position_embeddings.has_value();
  out.max_position_embeddings = cfg_file.max_position_embeddings.value_or(format::default_max_position_embeddings);
  const auto ckpt = format::SafetensorsCheckpoint::open(dir);
  bool any_causal = false;
  for (const auto& name : ckpt.names()) any_causal |= detail_checkpoint::is_causal(name);
  out.converted = !any_causal;
  if (out.converted && options.conversion.any()) {
    options.conversion.apply(cfg_file.config);
    try {
      cfg_file.config.validate("conversion");
    } catch (const DomainError& e) {
      throw DomainError(fmt::format("{}: converting with the given head settings: {}", dir.string(), e.what()));
    }
  }
  out.model = std::make_unique<model::CausalQwen<T>>(cfg_file.config, options.class_chunk);
  auto& m = *out.model;
  const auto& cfg = m.config();

  // what the file must hold: every backbone tensor; every causal one unless converting
  // (causal.ovr_threshold optional); lm_head.weight only when untied
  std::vector<format::ExpectedTensor> expected;
  for (const auto& slot : m.layout().slots()) {
    if (detail_checkpoint::is_causal(slot.name) && (out.converted || slot.name == model::names::threshold)) continue;
    expected.push_back({slot.name, slot.shape});
  }
  if (!cfg.tie_word_embeddings) expected.push_back({"lm_head.weight", {cfg.backbone.vocab_size, cfg.hidden_size()}});
  std::vector<format::ExpectedTensor> allowed = expected;
  if (!out.converted) allowed.push_back({model::names::threshold, {cfg.num_classes}});
  format::check_expected(ckpt, std::span<const format::ExpectedTensor>(expected), dir.string(), format::ExtraTensors::ignore);
  {  // extra tensors: name them all
    std::vector<std::string> extra;
    for (const auto& name : ckpt.names()) {
      bool known = false;
      for (const auto& e : allowed) known |= e.name == name;
      if (!known) extra.push_back(name);
    }
    if (!extra.empty())
      throw FormatError(fmt::format("{}: tensors the model does not have: {}{}", dir.string(), fmt::join(extra, ", "),
                                    cfg.tie_word_embeddings && ckpt.contains("lm_head.weight")
                                        ? " (lm_head.weight in a checkpoint whose config.json says tie_word_embeddings = true)"
                                        : ""));
  }

  auto& params = m.params();
  if (out.converted) {
    m.init_random(options.seed);  // heads get their inits (W_loc = I, scale_U = γ_init, …); the backbone is overwritten below
  }
  for (const auto& slot : m.layout().slots()) {
    if (ckpt.contains(slot.name)) ckpt.file_of(slot.name).read(slot.name, params.slot_span(slot.name));
  }
  if (!cfg.tie_word_embeddings) {
    out.lm_head = ckpt.file_of("lm_head.weight").template read_vector<float>("lm_head.weight");
    out.lm_head_shape = {cfg.backbone.vocab_size, cfg.hidden_size()};
  }
  if (out.converted) {
    // W_cls = the base lm_head's first K rows
    auto cls = params.slot_span(model::names::cls_w);
    const std::size_t n = cfg.num_classes * cfg.hidden_size();
    if (cfg.tie_word_embeddings) {
      auto embed = params.slot_span("model.embed_tokens.weight");
      std::copy_n(embed.begin(), n, cls.begin());
    } else {
      for (std::size_t i = 0; i < n; ++i) cls[i] = static_cast<T>(out.lm_head[i]);
    }
    // the numeric direction: a random unit vector
    std::mt19937_64 rng(options.seed + 1);
    std::normal_distribution<double> normal;
    auto dir_span = params.slot_span("causal.num_direction");
    double norm = 0;
    for (auto& v : dir_span) {
      v = static_cast<T>(normal(rng));
      norm += static_cast<double>(v) * static_cast<double>(v);
    }
    for (auto& v : dir_span) v = static_cast<T>(v / std::sqrt(norm));
  }
  params.touch();
  return out;
}

/// Which tensors and config.json keys save_model writes.
enum class SavedModel {
  causal_qwen,  // everything: a CausalQwen checkpoint
  base_qwen2    // the backbone alone and the Qwen2 keys: a base Qwen2 checkpoint, as published ones are
};

/// Writes `dir`/config.json and `dir`/model.safetensors (F32) atomically; creates `dir`.
template <class T>
void save_model(const std::filesystem::path& dir, const model::CausalQwen<T>& m,
                const nlohmann::json& config_base = nlohmann::json::object(),
                std::span<const float> lm_head = {}, SavedModel part = SavedModel::causal_qwen) {
  std::filesystem::create_directories(dir);
  const auto& params = m.params();
  std::deque<std::vector<float>> converted;  // float copies (a deque: the writer keeps views)
  format::SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("producer", "causalqwen");
  for (const auto& slot : m.layout().slots()) {
    if (part == SavedModel::base_qwen2 && detail_checkpoint::is_causal(slot.name)) continue;
    const T* data = params.data() + slot.offset;
    if constexpr (std::is_same_v<T, float>) {
      writer.add(slot.name, slot.shape, std::span<const float>(data, slot.size));
    } else {
      converted.emplace_back(data, data + slot.size);
      writer.add(slot.name, slot.shape, std::span<const float>(converted.back()));
    }
  }
  if (!m.config().tie_word_embeddings) {
    if (lm_head.empty()) {  // an untied model created here has no base lm_head: write embed_tokens
      const auto embed = params.template view<2>("model.embed_tokens.weight");
      converted.emplace_back(embed.begin(), embed.end());
      writer.add("lm_head.weight", {m.config().backbone.vocab_size, m.config().hidden_size()},
                 std::span<const float>(converted.back()));
    } else {
      writer.add("lm_head.weight", {m.config().backbone.vocab_size, m.config().hidden_size()}, lm_head);
    }
  }
  writer.write(dir / "model.safetensors");
  if (part == SavedModel::causal_qwen) return write_config_json(dir / "config.json", m.config(), config_base);
  auto json = config_to_json(m.config(), config_base);
  for (const char* key : format::causal_qwen_keys) json.erase(key);
  const std::string text = json.dump(2) + "\n";
  format::write_file_atomically(dir / "config.json", [&](format::AtomicFile& f) { f.write(std::string_view(text)); });
}

}  // namespace causalqwen::checkpoint
