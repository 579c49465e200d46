/// Shapes of a Qwen2 decoder stack, validated with clear errors.
#pragma once
#include "causalqwen/core/error.hpp"

#include <cstddef>

namespace causalqwen::nn {

struct TransformerConfig {
  std::size_t vocab_size = 0;
  std::size_t hidden_size = 0;        // H
  std::size_t intermediate_size = 0;  // F (SwiGLU width)
  std::size_t num_layers = 0;
  std::size_t num_heads = 0;     // query heads
  std::size_t num_kv_heads = 0;  // key/value heads (GQA groups)
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;

  /// head_dim = H / num_heads
  std::size_t head_dim() const { return num_heads ? hidden_size / num_heads : 0; }
  /// query heads sharing one KV head
  std::size_t group_size() const { return num_kv_heads ? num_heads / num_kv_heads : 0; }
  /// width of the fused q|k|v projection: (num_heads + 2·num_kv_heads)·head_dim
  std::size_t qkv_size() const { return (num_heads + 2 * num_kv_heads) * head_dim(); }

  /// Throws DomainError naming the first inconsistent field.
  void validate(const char* fn = "TransformerConfig") const {
    using detail::require;
    require(vocab_size > 0, fn, "vocab_size must be > 0");
    require(hidden_size > 0, fn, "hidden_size must be > 0");
    require(intermediate_size > 0, fn, "intermediate_size must be > 0");
    require(num_heads > 0, fn, "num_attention_heads must be > 0");
    require(num_kv_heads > 0, fn, "num_key_value_heads must be > 0");
    require(hidden_size % num_heads == 0, fn,
            "hidden_size {} is not divisible by num_attention_heads {}", hidden_size, num_heads);
    require(num_heads % num_kv_heads == 0, fn,
            "num_attention_heads {} is not divisible by num_key_value_heads {}", num_heads,
            num_kv_heads);
    require(head_dim() % 2 == 0, fn, "head_dim {} must be even for rotary embeddings",
            head_dim());
    require(rms_norm_eps > 0, fn, "rms_norm_eps must be > 0, got {}", rms_norm_eps);
    require(rope_theta > 0, fn, "rope_theta must be > 0, got {}", rope_theta);
  }

  /// Qwen2.5-0.5B (24 layers; tied embeddings).
  static TransformerConfig qwen2_5_0_5b() {
    return {151936, 896, 4864, 24, 14, 2, 1e-6, 1e6};
  }
};

}  // namespace causalqwen::nn
