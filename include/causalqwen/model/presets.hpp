/// Named model shapes for training from scratch. Every preset ties the word embeddings, sets
/// C = H and takes its classes from the tokenizer: K = <NUM>'s id + 1 OvR classes (the tokens
/// after <NUM> are never classes) and V = K embedding rows (qwen2.5-0.5b: at least 151936, the
/// base model's padded vocabulary).
///
///   preset         H     FFN    layers  heads  KV heads
///   tiny           64    176    2       4      2
///   small          256   704    4       4      2
///   qwen2.5-0.5b   896   4864   24      14     2
/// All use rms_norm_eps 1e-6 and rope_theta 1e6; the other fields keep CausalConfig's defaults.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/model/config.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

namespace causalqwen::model {

/// The names preset_config() knows, in the order of the table above.
inline constexpr std::array<std::string_view, 3> preset_names = {"tiny", "small", "qwen2.5-0.5b"};

/// The CausalConfig of preset `name` (see the table above) for a vocabulary whose <NUM> has id
/// `num_token_id` (≥ 0). DomainError for an unknown name or a negative id.
inline CausalConfig preset_config(std::string_view name, std::int64_t num_token_id) {
  detail::require(num_token_id >= 0, "model::preset_config", "num_token_id must be >= 0, got {}", num_token_id);
  CausalConfig c;
  const auto K = static_cast<std::size_t>(num_token_id + 1);
  if (name == "tiny") c.backbone = {K, 64, 176, 2, 4, 2, 1e-6, 1e6};
  else if (name == "small") c.backbone = {K, 256, 704, 4, 4, 2, 1e-6, 1e6};
  else if (name == "qwen2.5-0.5b") c.backbone = {std::max<std::size_t>(K, 151936), 896, 4864, 24, 14, 2, 1e-6, 1e6};
  else
    throw DomainError(fmt::format("causalqwen::model::preset_config: unknown preset '{}' (expected tiny, small or "
                                  "qwen2.5-0.5b)",
                                  name));
  c.causal_size = c.backbone.hidden_size;
  c.num_classes = K;
  c.num_token_id = num_token_id;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace causalqwen::model
