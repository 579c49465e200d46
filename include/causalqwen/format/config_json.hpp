/// config.json's fields: the Hugging Face Qwen2 keys plus CausalQwen's, each read and checked
/// with errors naming the file, the field and what was expected. No model type is needed: the
/// model's configuration is made from these fields above the model (checkpoint/model_config.hpp).
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
/// Sizes above ModelSizeLimits are refused before anything is allocated.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace causalqwen::format {

/// The position cap of a model whose config.json states no max_position_embeddings.
inline constexpr std::size_t default_max_position_embeddings = 32768;

/// The largest value config.json may give each size field (far beyond any Qwen2 model: the
/// 72B one has V = 152064, H = 8192, F = 29568, L = 80, 64 heads).
struct ModelSizeLimits {
  std::size_t vocab_size = std::size_t{1} << 26;
  std::size_t hidden_size = std::size_t{1} << 16;
  std::size_t intermediate_size = std::size_t{1} << 20;
  std::size_t num_hidden_layers = std::size_t{1} << 12;
  std::size_t num_attention_heads = std::size_t{1} << 12;
  std::size_t max_position_embeddings = std::size_t{1} << 24;
};

/// The CausalQwen keys of config.json (the others are Qwen2's).
inline constexpr std::array<const char*, 14> causal_qwen_keys = {
    "num_token_id",  "causal_size",   "num_classes",   "gamma_init",    "ovr_threshold", "reg_loss_weight", "alpha_gate",
    "b_noise_init",  "reg_init_gain", "reg_bias_init", "scale_U_floor", "scale_Y_floor", "bce_form",        "reg_head"};

/// What config.json held, field by field, with the defaults above filled in; the fields left
/// optional are those whose default is the model's own (ovr_threshold, bce_form, reg_head).
struct ConfigFields {
  std::size_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  std::size_t num_attention_heads = 0, num_key_value_heads = 0;
  std::optional<std::size_t> max_position_embeddings;  // when the file states it
  double rms_norm_eps = 1e-6, rope_theta = 1e6;
  bool tie_word_embeddings = false;
  std::size_t causal_size = 0;
  std::int64_t num_token_id = 0;
  bool has_num_token_id = false;  // the file states num_token_id (a base Qwen2 checkpoint does not)
  std::size_t num_classes = 0;
  double gamma_init = 10.0;
  std::optional<std::vector<double>> ovr_threshold;  // one number, or one per class
  double reg_loss_weight = 1.0, alpha_gate = 0.0, b_noise_init = 0.1, reg_init_gain = 0.01, reg_bias_init = 0.0;
  double scale_U_floor = 0.0, scale_Y_floor = 0.0;
  std::optional<std::string> bce_form;  // "stable" or "epsilon"
  std::optional<std::string> reg_head;  // a string; its value is the model's to check
  nlohmann::json json;                  // the whole object (to write back unknown keys)
};

/// FormatError "<file>: field '<key>' <what>".
inline FormatError config_field_error(const std::filesystem::path& file, const std::string& key, const std::string& what) {
  return FormatError(fmt::format("{}: field '{}' {}", file.string(), key, what));
}

namespace detail_config {

/// j[key]: an integer in [1, limit], or `fallback` when absent (FormatError when absent without one).
inline std::size_t get_size(const nlohmann::json& j, const std::filesystem::path& file, const std::string& key,
                            std::size_t limit, std::optional<std::size_t> fallback = std::nullopt) {
  if (!j.contains(key)) {
    if (fallback) return *fallback;
    throw config_field_error(file, key, fmt::format("is missing (an integer in [1, {}] was expected)", limit));
  }
  const auto& v = j.at(key);
  const bool in_range = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() >= 1 && v.get<std::uint64_t>() <= limit
                            : v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
                                  static_cast<std::uint64_t>(v.get<std::int64_t>()) <= limit;
  if (!in_range)
    throw config_field_error(file, key, fmt::format("must be an integer in [1, {}], got {}", limit, v.dump()));
  return static_cast<std::size_t>(v.get<std::uint64_t>());
}

/// j[key] as a number, or `fallback` when absent.
inline double get_number(const nlohmann::json& j, const std::filesystem::path& file, const std::string& key,
                         double fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number()) throw config_field_error(file, key, fmt::format("must be a number, got {}", v.dump()));
  return v.get<double>();
}

/// read_config_fields after the parse: every field checked in the file's documented order.
inline ConfigFields check_config_fields(ConfigFields out, const std::filesystem::path& file,
                                        std::optional<std::int64_t> num_token_id_fallback) {
  const ModelSizeLimits limits;
  const auto& j = out.json;
  if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object at the top level", file.string()));
  if (j.contains("model_type") && j["model_type"] != "qwen2" && j["model_type"] != "causalqwen")
    throw config_field_error(file, "model_type",
                             fmt::format("must be \"qwen2\" or \"causalqwen\", got {}", j["model_type"].dump()));
  out.vocab_size = get_size(j, file, "vocab_size", limits.vocab_size);
  out.hidden_size = get_size(j, file, "hidden_size", limits.hidden_size);
  out.intermediate_size = get_size(j, file, "intermediate_size", limits.intermediate_size);
  out.num_hidden_layers = get_size(j, file, "num_hidden_layers", limits.num_hidden_layers);
  out.num_attention_heads = get_size(j, file, "num_attention_heads", limits.num_attention_heads);
  out.num_key_value_heads = get_size(j, file, "num_key_value_heads", limits.num_attention_heads, out.num_attention_heads);
  if (j.contains("max_position_embeddings"))
    out.max_position_embeddings = get_size(j, file, "max_position_embeddings", limits.max_position_embeddings);
  out.rms_norm_eps = get_number(j, file, "rms_norm_eps", 1e-6);
  out.rope_theta = get_number(j, file, "rope_theta", 1e6);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean())
      throw config_field_error(file, "tie_word_embeddings",
                               fmt::format("must be true or false, got {}", j["tie_word_embeddings"].dump()));
    out.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  } else {
    out.tie_word_embeddings = false;
  }
  out.causal_size = get_size(j, file, "causal_size", limits.hidden_size, out.hidden_size);
  if (j.contains("num_token_id")) {
    if (!j["num_token_id"].is_number_integer() || j["num_token_id"].get<long long>() < 0 ||
        j["num_token_id"].get<std::uint64_t>() >= limits.vocab_size)
      throw config_field_error(file, "num_token_id", fmt::format("must be an integer in [0, {}), got {}",
                                                                 limits.vocab_size, j["num_token_id"].dump()));
    out.num_token_id = j["num_token_id"].get<std::int64_t>();
    out.has_num_token_id = true;
  } else if (num_token_id_fallback) {
    out.num_token_id = *num_token_id_fallback;
  } else {
    throw config_field_error(file, "num_token_id",
                             "is missing: give <NUM>'s id (the first id after the tokenizer's vocabulary), "
                             "or a tokenizer from which to take it");
  }
  if (out.num_token_id < 0 || std::uint64_t(out.num_token_id) >= limits.vocab_size)
    throw config_field_error(file, "num_token_id",
                             fmt::format("must lie in [0, {}), got {}", limits.vocab_size, out.num_token_id));
  out.num_classes = get_size(j, file, "num_classes", limits.vocab_size, static_cast<std::size_t>(out.num_token_id) + 1);
  out.gamma_init = get_number(j, file, "gamma_init", 10.0);
  if (j.contains("ovr_threshold")) {
    const auto& t = j["ovr_threshold"];
    std::vector<double> thresholds;
    if (t.is_number()) {
      thresholds.push_back(t.get<double>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& v : t) {
        if (!v.is_number())
          throw config_field_error(file, "ovr_threshold", fmt::format("must hold numbers only, got {}", v.dump()));
        thresholds.push_back(v.get<double>());
      }
    } else {
      throw config_field_error(file, "ovr_threshold",
                               fmt::format("must be a number or a non-empty list of numbers, got {}", t.dump()));
    }
    out.ovr_threshold = std::move(thresholds);
  }
  out.reg_loss_weight = get_number(j, file, "reg_loss_weight", 1.0);
  out.alpha_gate = get_number(j, file, "alpha_gate", 0.0);
  out.b_noise_init = get_number(j, file, "b_noise_init", 0.1);
  out.reg_init_gain = get_number(j, file, "reg_init_gain", 0.01);
  out.reg_bias_init = get_number(j, file, "reg_bias_init", 0.0);
  out.scale_U_floor = get_number(j, file, "scale_U_floor", 0.0);
  out.scale_Y_floor = get_number(j, file, "scale_Y_floor", 0.0);
  if (j.contains("bce_form")) {
    if (j["bce_form"] != "stable" && j["bce_form"] != "epsilon")
      throw config_field_error(file, "bce_form",
                               fmt::format("must be \"stable\" or \"epsilon\", got {}", j["bce_form"].dump()));
    out.bce_form = j["bce_form"].get<std::string>();
  }
  if (j.contains("reg_head")) {
    const auto& v = j["reg_head"];
    if (!v.is_string())
      throw config_field_error(file, "reg_head", fmt::format("must be \"cauchy\", \"gaussian\" or \"mse\", got {}", v.dump()));
    out.reg_head = v.get<std::string>();
  }
  return out;
}

}  // namespace detail_config

/// Parses config.json and checks each field's type and range. Throws FormatError (unreadable
/// file, malformed JSON, a field missing, of the wrong type or out of range), naming the file.
/// `num_token_id_fallback` supplies <NUM>'s id when the file has none (a base model: the first
/// id after the tokenizer's vocabulary); without either, the file is an error.
inline ConfigFields read_config_fields(const std::filesystem::path& file,
                                       std::optional<std::int64_t> num_token_id_fallback = std::nullopt) {
  ConfigFields out;
  out.json = json::parse_file(file);
  return json::guarded(file.string(),
                       [&] { return detail_config::check_config_fields(std::move(out), file, num_token_id_fallback); });
}

}  // namespace causalqwen::format
