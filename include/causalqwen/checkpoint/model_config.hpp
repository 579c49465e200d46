/// config.json as a model's configuration: the checked fields (format/config_json.hpp) made into
/// a model::CausalConfig, validated, and checked against the memory available before anything
/// is allocated (model_size.hpp); and a configuration written back as config.json atomically
/// (keys the library does not use are kept as they were).
///
///   CausalConfig ← fields:  backbone sizes, eps, theta, tie_word_embeddings, the CausalQwen keys;
///                           ovr_threshold, bce_form, reg_head only when stated (else the model's default)
#pragma once
#include "causalqwen/checkpoint/model_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/format/atomic_file.hpp"
#include "causalqwen/format/config_json.hpp"
#include "causalqwen/model/config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace causalqwen::checkpoint {

/// What config.json held: the configuration, whether CausalQwen's own keys were present
/// (a base Qwen2 checkpoint has none), and the whole JSON object (to write back unknown keys).
struct ConfigFile {
  model::CausalConfig config;
  bool has_num_token_id = false;
  std::optional<std::size_t> max_position_embeddings;  // when the file states it
  nlohmann::json json;
};

/// The configuration config.json's checked fields describe: every field copied, reg_head parsed
/// (FormatError naming the file and field for an unknown name), then CausalConfig::validate
/// (its DomainError becomes FormatError "<file>: …") and check_model_fits_memory.
inline model::CausalConfig causal_config_of(const format::ConfigFields& f, const std::filesystem::path& file) {
  model::CausalConfig c;
  auto& b = c.backbone;
  b.vocab_size = f.vocab_size;
  b.hidden_size = f.hidden_size;
  b.intermediate_size = f.intermediate_size;
  b.num_layers = f.num_hidden_layers;
  b.num_heads = f.num_attention_heads;
  b.num_kv_heads = f.num_key_value_heads;
  b.rms_norm_eps = f.rms_norm_eps;
  b.rope_theta = f.rope_theta;
  c.tie_word_embeddings = f.tie_word_embeddings;
  c.causal_size = f.causal_size;
  c.num_token_id = f.num_token_id;
  c.num_classes = f.num_classes;
  c.gamma_init = f.gamma_init;
  if (f.ovr_threshold) c.ovr_threshold = *f.ovr_threshold;
  c.reg_loss_weight = f.reg_loss_weight;
  c.alpha_gate = f.alpha_gate;
  c.b_noise_init = f.b_noise_init;
  c.reg_init_gain = f.reg_init_gain;
  c.reg_bias_init = f.reg_bias_init;
  c.scale_U_floor = f.scale_U_floor;
  c.scale_Y_floor = f.scale_Y_floor;
  if (f.bce_form) c.bce_form = *f.bce_form == "epsilon" ? model::BceForm::epsilon : model::BceForm::stable;
  if (f.reg_head && !model::parse_reg_head(*f.reg_head, c.reg_head))
    throw format::config_field_error(file, "reg_head", fmt::format("must be \"cauchy\", \"gaussian\" or \"mse\", got {}",
                                                           nlohmann::json(*f.reg_head).dump()));
  try {
    c.validate("config");
  } catch (const DomainError& e) {
    throw FormatError(fmt::format("{}: {}", file.string(), e.what()));
  }
  check_model_fits_memory(c, file.string());
  return c;
}

/// Parses config.json into a configuration. Throws FormatError (unreadable file, malformed
/// JSON, a field of the wrong type) or FormatError wrapping the DomainError of a value out of
/// range, each naming the file. `num_token_id_fallback` supplies <NUM>'s id when the file has
/// none (a base model: the first id after the tokenizer's vocabulary); without either, the file
/// is an error.
inline ConfigFile read_config_json(const std::filesystem::path& file,
                                   std::optional<std::int64_t> num_token_id_fallback = std::nullopt) {
  format::ConfigFields fields = format::read_config_fields(file, num_token_id_fallback);
  ConfigFile out;
  out.config = causal_config_of(fields, file);
  out.has_num_token_id = fields.has_num_token_id;
  out.max_position_embeddings = fields.max_position_embeddings;
  out.json = std::move(fields.json);
  return out;
}

/// The JSON of a configuration: `base` (keys kept as they were) updated with every key above.
inline nlohmann::json config_to_json(const model::CausalConfig& c, nlohmann::json base = nlohmann::json::object()) {
  const auto& b = c.backbone;
  base["model_type"] = "qwen2";
  if (!base.contains("architectures")) base["architectures"] = {"Qwen2ForCausalLM"};
  if (!base.contains("hidden_act")) base["hidden_act"] = "silu";
  base["vocab_size"] = b.vocab_size;
  base["hidden_size"] = b.hidden_size;
  base["intermediate_size"] = b.intermediate_size;
  base["num_hidden_layers"] = b.num_layers;
  base["num_attention_heads"] = b.num_heads;
  base["num_key_value_heads"] = b.num_kv_heads;
  base["rms_norm_eps"] = b.rms_norm_eps;
  base["rope_theta"] = b.rope_theta;
  base["tie_word_embeddings"] = c.tie_word_embeddings;
  base["num_token_id"] = c.num_token_id;
  base["causal_size"] = c.causal_size;
  base["num_classes"] = c.num_classes;
  base["gamma_init"] = c.gamma_init;
  if (c.ovr_threshold.size() == 1) base["ovr_threshold"] = c.ovr_threshold[0];
  else base["ovr_threshold"] = c.ovr_threshold;
  base["reg_loss_weight"] = c.reg_loss_weight;
  base["alpha_gate"] = c.alpha_gate;
  base["b_noise_init"] = c.b_noise_init;
  base["reg_init_gain"] = c.reg_init_gain;
  base["reg_bias_init"] = c.reg_bias_init;
  base["scale_U_floor"] = c.scale_U_floor;
  base["scale_Y_floor"] = c.scale_Y_floor;
  base["bce_form"] = c.bce_form == model::BceForm::stable ? "stable" : "epsilon";
  base["reg_head"] = std::string(model::reg_head_name(c.reg_head));
  return base;
}

/// Writes config.json atomically (temporary file, fsync, rename).
inline void write_config_json(const std::filesystem::path& file, const model::CausalConfig& c,
                              const nlohmann::json& base = nlohmann::json::object()) {
  const std::string text = config_to_json(c, base).dump(2) + "\n";
  format::write_file_atomically(file, [&](format::AtomicFile& f) { f.write(std::string_view(text)); });
}

}  // namespace causalqwen::checkpoint
