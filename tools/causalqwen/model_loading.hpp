// Shared by the causalqwen subcommands that read a checkpoint: <NUM>'s id for a base model
// (from --num-token-id, or from a tokenizer.json), then checkpoint::load_model; and the check that a
// tokenizer is the model's; --weights, the type decoding reads the weight matrices in.
#pragma once
#include "numeric_options.hpp"

#include <causalqwen/checkpoint/model_checkpoint.hpp>
#include <causalqwen/linalg/bf16_gemm.hpp>
#include <causalqwen/linalg/int8_dot.hpp>
#include <causalqwen/linalg/kernels/onednn_bf16.hpp>
#include <causalqwen/text/tokenizer.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>

namespace cqcli {

/// Ids a vocabulary may hold (config.json's vocab_size is at most 2^26).
inline constexpr std::int64_t max_token_id = (std::int64_t{1} << 26) - 1;

/// --num-token-id into `target` (-1 until given: the tokenizer decides).
inline CLI::Option* add_num_token_id(CLI::App* sub, std::int64_t& target) {
  return add_integer(sub, "--num-token-id", target, {0, max_token_id},
                     "<NUM>'s id for a base Qwen2 checkpoint (default: the first id after the tokenizer's vocabulary)",
                     false);
}

/// Options common to the commands that load a model.
struct ModelOptions {
  std::string model_dir;
  std::string tokenizer;         // tokenizer.json; default: <model_dir>/tokenizer.json if present
  std::int64_t num_token_id = -1;  // <NUM>'s id for a base checkpoint without one in config.json

  void add_to(CLI::App* sub, const char* dir_flag = "--model") {
    sub->add_option(dir_flag, model_dir, "checkpoint directory (config.json + model.safetensors)")
        ->required()
        ->check(CLI::ExistingDirectory);
    sub->add_option("--tokenizer", tokenizer, "tokenizer.json (default: the one in the checkpoint directory)");
    add_num_token_id(sub, num_token_id);
  }

  /// The tokenizer file to use, if any.
  std::optional<std::filesystem::path> tokenizer_path() const {
    if (!tokenizer.empty()) return tokenizer;
    const auto candidate = std::filesystem::path(model_dir) / "tokenizer.json";
    if (std::filesystem::exists(candidate)) return candidate;
    return std::nullopt;
  }

  causalqwen::checkpoint::LoadOptions load_options() const {
    causalqwen::checkpoint::LoadOptions o;
    if (num_token_id >= 0) {
      o.num_token_id = num_token_id;
    } else if (auto path = tokenizer_path()) {
      o.num_token_id = causalqwen::text::Tokenizer::from_file(path->string()).num_token_id();
    }
    return o;
  }

  template <class T>
  causalqwen::checkpoint::LoadedModel<T> load() const {
    return causalqwen::checkpoint::load_model<T>(model_dir, load_options());
  }
};

/// --weights f32|bf16|int8 (generate, forward, eval): decoding reads the weight matrices as
/// bf16 or int8 copies (CausalQwen::use_weights), and every other product computes with the
/// float weights rounded to the same values.
struct WeightsOption {
  std::string weights = "f32";

  void add_to(CLI::App* sub) {
    sub->add_option("--weights", weights,
                    "f32 | bf16 | int8: the weight matrices as decoding reads them (bf16: half the bytes per token, "
                    "int8: a quarter, one scale per row); other products use the float weights rounded alike")
        ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  }
  template <class T>
  void apply(causalqwen::model::CausalQwen<T>& model) const {
    const auto type = causalqwen::linalg::parse_weight_type(weights);
    if (type == causalqwen::linalg::Format::f32) return;
    if constexpr (!std::is_same_v<T, float>)
      throw causalqwen::DomainError(fmt::format("--weights {} needs --dtype f32 (packed weights serve float models)", weights));
    else {
      model.use_weights(type);
      // the packed types pay only with their instructions (AVX-512's, or AVX2's): without them a
      // portable loop runs, slower than the float kernels
      const bool fast = type == causalqwen::linalg::Format::bf16 ? causalqwen::linalg::bf16_kernel_is_hardware()
                                                                      : causalqwen::linalg::int8_kernel_is_hardware();
      if (!fast)
        fmt::print(stderr, "note: this CPU has neither {} nor AVX2, so --weights {} runs a portable loop, slower here than --weights f32\n",
                   type == causalqwen::linalg::Format::bf16 ? "AVX512-BF16" : "AVX512-VNNI", weights);
      // prefill's products of many rows on oneDNN (AMX), decoding's few rows on our own kernels
      if (causalqwen::linalg::bf16_products_on_onednn())
        fmt::print(stderr, "kernels: --weights {} prefill on {}, decoding on {}\n", weights,
                   type == causalqwen::linalg::Format::bf16 ? causalqwen::linalg::bf16_kernel_name()
                                                                : causalqwen::linalg::onednn_int8_prefill_name(),
                   type == causalqwen::linalg::Format::bf16 ? causalqwen::linalg::bf16_own_kernel_name()
                                                                : causalqwen::linalg::int8_kernel_name());
    }
  }
};

/// Where a loaded model's position cap comes from, for messages.
template <class T>
std::string position_cap_source(const causalqwen::checkpoint::LoadedModel<T>& m) {
  return m.max_position_embeddings_stated ? "config.json" : "the default cap: config.json states none";
}

/// The position cap that generating `max_new_tokens` tokens is held to: the model's
/// max_position_embeddings (config.json's, or format::default_max_position_embeddings when it states
/// none); FormatError naming --max-new-tokens when those tokens alone pass it.
template <class T>
std::size_t generation_position_cap(const causalqwen::checkpoint::LoadedModel<T>& m, std::size_t max_new_tokens) {
  const std::size_t cap = m.max_position_embeddings.value_or(causalqwen::format::default_max_position_embeddings);
  if (max_new_tokens > cap)
    throw causalqwen::FormatError(fmt::format("--max-new-tokens {} must be at most the model's max_position_embeddings {} "
                                              "({}), which must also hold the prompt",
                                              max_new_tokens, cap, position_cap_source(m)));
  return cap;
}

/// The tokenizer must be the model's: the same <NUM> id, and no id beyond the model's rows.
inline void require_matching(const causalqwen::text::Tokenizer& tok, const std::filesystem::path& tok_path,
                             const causalqwen::model::CausalConfig& c, const std::string& model_dir) {
  if (tok.num_token_id() != c.num_token_id)
    throw causalqwen::FormatError(fmt::format("{}: <NUM> has the id {} in this tokenizer but {} in the model {} "
                                              "(config.json num_token_id): the tokenizer is not the model's",
                                              tok_path.string(), tok.num_token_id(), c.num_token_id, model_dir));
  if (static_cast<std::size_t>(tok.size()) > c.backbone.vocab_size)
    throw causalqwen::FormatError(fmt::format("{}: the tokenizer has {} ids but the model {} has {} embedding rows "
                                              "(config.json vocab_size): the tokenizer is not the model's",
                                              tok_path.string(), tok.size(), model_dir, c.backbone.vocab_size));
}

}  // namespace cqcli
