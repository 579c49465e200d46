/// config.json: the Hugging Face Qwen2 keys plus CausalQwen's, read into a model::CausalConfig
/// with errors naming the file, the field and what was expected, and written back atomically
/// (keys the library does not use are kept as they were).
///
/// Qwen2 keys: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
///   num_attention_heads, num_key_value_heads (default: num_attention_heads), rms_norm_eps
///   (1e-6), rope_theta (1e6), tie_word_embeddings (false, as Hugging Face's Qwen2Config).
/// CausalQwen keys (all optional in a base checkpoint): num_token_id, causal_size (= hidden),
///   num_classes (K; default num_token_id + 1), gamma_init (10), ovr_threshold (a number or a
///   list of K numbers; 10), reg_loss_weight (1), alpha_gate (0), b_noise_init (0.1),
///   reg_init_gain (0.01), reg_bias_init (0), scale_U_floor and scale_Y_floor (0: none; lower
///   bounds added to scale_U and scale_Y), bce_form ("stable" or "epsilon"), reg_head ("cauchy",
///   "gaussian" or "mse": how the regression head is read, trained and scored; absent: cauchy).
/// max_position_embeddings (optional): the longest sequence the model was trained for; the
///   generate, eval, forward and report commands refuse (or, generate --long-prompt keep-end,
///   cut) longer sequences by it. A file that states none gets default_max_position_embeddings
///   (32768, Qwen2.5's own) from load_model: a cap, never none.
/// Sizes above ModelSizeLimits, or a model whose parameters would not fit the memory available,
/// are refused before anything is allocated (model_size.hpp).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/io/atomic_file.hpp"
#include "causalqwen/io/model_size.hpp"
#include "causalqwen/model/config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace causalqwen::io {

/// What config.json held: the configuration, whether CausalQwen's own keys were present
/// (a base Qwen2 checkpoint has none), and the whole JSON object (to write back unknown keys).
/// The position cap of a model whose config.json states no max_position_embeddings.
inline constexpr std::size_t default_max_position_embeddings = 32768;

struct ConfigFile {
  model::CausalConfig config;
  bool has_num_token_id = false;
  std::optional<std::size_t> max_position_embeddings;  // when the file states it
  nlohmann::json json;
};

namespace detail_config {

inline FormatError field_error(const std::filesystem::path& file, const std::string& key, const std::string& what) {
  return FormatError(fmt::format("{}: field '{}' {}", file.string(), key, what));
}

/// j[key]: an integer in [1, limit], or `fallback` when absent (FormatError when absent without one).
inline std::size_t get_size(const nlohmann::json& j, const std::filesystem::path& file, const std::string& key,
                            std::size_t limit, std::optional<std::size_t> fallback = std::nullopt) {
  if (!j.contains(key)) {
    if (fallback) return *fallback;
    throw field_error(file, key, fmt::format("is missing (an integer in [1, {}] was expected)", limit));
  }
  const auto& v = j.at(key);
  const bool in_range = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() >= 1 && v.get<std::uint64_t>() <= limit
                            : v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
                                  static_cast<std::uint64_t>(v.get<std::int64_t>()) <= limit;
  if (!in_range)
    throw field_error(file, key, fmt::format("must be an integer in [1, {}], got {}", limit, v.dump()));
  return static_cast<std::size_t>(v.get<std::uint64_t>());
}

inline double get_number(const nlohmann::json& j, const std::filesystem::path& file, const std::string& key,
                         double fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number()) throw field_error(file, key, fmt::format("must be a number, got {}", v.dump()));
  return v.get<double>();
}

/// read_config_json after the parse: every field checked, sizes before anything is allocated.
inline ConfigFile read_config_fields(ConfigFile out, const std::filesystem::path& file,
                                     std::optional<std::int64_t> num_token_id_fallback) {
  const ModelSizeLimits limits;
  const auto& j = out.json;
  if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object at the top level", file.string()));
  if (j.contains("model_type") && j["model_type"] != "qwen2" && j["model_type"] != "causalqwen")
    throw field_error(file, "model_type", fmt::format("must be \"qwen2\" or \"causalqwen\", got {}", j["model_type"].dump()));
  auto& c = out.config;
  auto& b = c.backbone;
  b.vocab_size = get_size(j, file, "vocab_size", limits.vocab_size);
  b.hidden_size = get_size(j, file, "hidden_size", limits.hidden_size);
  b.intermediate_size = get_size(j, file, "intermediate_size", limits.intermediate_size);
  b.num_layers = get_size(j, file, "num_hidden_layers", limits.num_hidden_layers);
  b.num_heads = get_size(j, file, "num_attention_heads", limits.num_attention_heads);
  b.num_kv_heads = get_size(j, file, "num_key_value_heads", limits.num_attention_heads, b.num_heads);
  if (j.contains("max_position_embeddings"))
    out.max_position_embeddings = get_size(j, file, "max_position_embeddings", limits.max_position_embeddings);
  b.rms_norm_eps = get_number(j, file, "rms_norm_eps", 1e-6);
  b.rope_theta = get_number(j, file, "rope_theta", 1e6);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean())
      throw field_error(file, "tie_word_embeddings", fmt::format("must be true or false, got {}", j["tie_word_embeddings"].dump()));
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  } else {
    c.tie_word_embeddings = false;
  }
  c.causal_size = get_size(j, file, "causal_size", limits.hidden_size, b.hidden_size);
  if (j.contains("num_token_id")) {
    if (!j["num_token_id"].is_number_integer() || j["num_token_id"].get<long long>() < 0 ||
        j["num_token_id"].get<std::uint64_t>() >= limits.vocab_size)
      throw field_error(file, "num_token_id", fmt::format("must be an integer in [0, {}), got {}", limits.vocab_size,
                                                          j["num_token_id"].dump()));
    c.num_token_id = j["num_token_id"].get<std::int64_t>();
    out.has_num_token_id = true;
  } else if (num_token_id_fallback) {
    c.num_token_id = *num_token_id_fallback;
  } else {
    throw field_error(file, "num_token_id",
                      "is missing: give <NUM>'s id (the first id after the tokenizer's vocabulary), "
                      "or a tokenizer from which to take it");
  }
  if (c.num_token_id < 0 || std::uint64_t(c.num_token_id) >= limits.vocab_size)
    throw field_error(file, "num_token_id", fmt::format("must lie in [0, {}), got {}", limits.vocab_size, c.num_token_id));
  c.num_classes = get_size(j, file, "num_classes", limits.vocab_size, static_cast<std::size_t>(c.num_token_id) + 1);
  c.gamma_init = get_number(j, file, "gamma_init", 10.0);
  if (j.contains("ovr_threshold")) {
    const auto& t = j["ovr_threshold"];
    c.ovr_threshold.clear();
    if (t.is_number()) {
      c.ovr_threshold.push_back(t.get<double>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& v : t) {
        if (!v.is_number()) throw field_error(file, "ovr_threshold", fmt::format("must hold numbers only, got {}", v.dump()));
        c.ovr_threshold.push_back(v.get<double>());
      }
    } else {
      throw field_error(file, "ovr_threshold", fmt::format("must be a number or a non-empty list of numbers, got {}", t.dump()));
    }
  }
  c.reg_loss_weight = get_number(j, file, "reg_loss_weight", 1.0);
  c.alpha_gate = get_number(j, file, "alpha_gate", 0.0);
  c.b_noise_init = get_number(j, file, "b_noise_init", 0.1);
  c.reg_init_gain = get_number(j, file, "reg_init_gain", 0.01);
  c.reg_bias_init = get_number(j, file, "reg_bias_init", 0.0);
  c.scale_U_floor = get_number(j, file, "scale_U_floor", 0.0);
  c.scale_Y_floor = get_number(j, file, "scale_Y_floor", 0.0);
  if (j.contains("bce_form")) {
    if (j["bce_form"] == "stable") c.bce_form = model::BceForm::stable;
    else if (j["bce_form"] == "epsilon") c.bce_form = model::BceForm::epsilon;
    else throw field_error(file, "bce_form", fmt::format("must be \"stable\" or \"epsilon\", got {}", j["bce_form"].dump()));
  }
  if (j.contains("reg_head")) {
    const auto& v = j["reg_head"];
    if (!v.is_string() || !model::parse_reg_head(v.get<std::string>(), c.reg_head))
      throw field_error(file, "reg_head", fmt::format("must be \"cauchy\", \"gaussian\" or \"mse\", got {}", v.dump()));
  }
  try {
    c.validate("config");
  } catch (const DomainError& e) {
    throw FormatError(fmt::format("{}: {}", file.string(), e.what()));
  }
  check_model_fits_memory(c, file.string());
  return out;
}
}  // namespace detail_config

/// Parses config.json. Throws FormatError (unreadable file, malformed JSON, a field of the
/// wrong type) or FormatError wrapping the DomainError of a value out of range, each naming
/// the file. `num_token_id_fallback` supplies <NUM>'s id when the file has none (a base model:
/// the first id after the tokenizer's vocabulary); without either, the file is an error.
inline ConfigFile read_config_json(const std::filesystem::path& file,
                                   std::optional<std::int64_t> num_token_id_fallback = std::nullopt) {
  using namespace detail_config;
  ConfigFile out;
  out.json = json::parse_file(file);
  return json::guarded(file.string(), [&] { return read_config_fields(std::move(out), file, num_token_id_fallback); });
}

/// The CausalQwen keys of config.json (the others are Qwen2's).
inline constexpr std::array<const char*, 14> causal_qwen_keys = {
    "num_token_id",  "causal_size",   "num_classes",   "gamma_init",    "ovr_threshold", "reg_loss_weight", "alpha_gate",
    "b_noise_init",  "reg_init_gain", "reg_bias_init", "scale_U_floor", "scale_Y_floor", "bce_form",        "reg_head"};

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
  write_file_atomically(file, [&](AtomicFile& f) { f.write(std::string_view(text)); });
}

}  // namespace causalqwen::io
