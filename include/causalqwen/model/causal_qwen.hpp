/// CausalQwen<T, Config>: NumericEmbedding → Qwen2 Transformer → Abduction → Action → Loss,
/// forward and backward, all parameters in one arena (Hugging Face names plus `causal.*`).
///
///   CausalQwen<float>                         shapes from a CausalConfig at run time
///                                             (e.g. read from config.json)
///   CausalQwen<float, StaticConfig<…>>        shapes as compile-time constants, checked by
///                                             static_asserts with readable messages
/// Both share one implementation (CausalQwen<T, RuntimeConfig>).
#pragma once
#include "causalqwen/model/causal_head.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/head_params.hpp"
#include "causalqwen/nn/transformer.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace causalqwen::model {

/// Tag: the model's shapes are known only at run time.
struct RuntimeConfig {};

/// A model whose shapes are types: `StaticConfig<Vocab, Hidden, Intermediate, Layers, Heads,
/// KvHeads, Classes, NumToken>` (C = Hidden). Wrong shapes do not compile.
template <std::size_t Vocab, std::size_t Hidden, std::size_t Intermediate, std::size_t Layers,
          std::size_t Heads, std::size_t KvHeads, std::size_t Classes, std::size_t NumToken,
          std::size_t Causal = Hidden>
struct StaticConfig {
  static_assert(Hidden > 0 && Heads > 0 && KvHeads > 0 && Layers > 0 && Intermediate > 0,
                "causalqwen::StaticConfig: every dimension must be positive.");
  static_assert(Causal == Hidden,
                "causalqwen::StaticConfig: the causal size C must equal the hidden size H, because the abduction network's W_loc is initialised to the identity.");
  static_assert(Hidden % Heads == 0,
                "causalqwen::StaticConfig: the hidden size must be divisible by the number of attention heads.");
  static_assert(Heads % KvHeads == 0,
                "causalqwen::StaticConfig: the number of attention heads must be divisible by the number of key/value heads (grouped-query attention).");
  static_assert((Hidden / Heads) % 2 == 0,
                "causalqwen::StaticConfig: the head dimension must be even for rotary embeddings.");
  static_assert(Classes <= Vocab,
                "causalqwen::StaticConfig: there cannot be more OvR classes than embedding rows.");
  static_assert(NumToken < Classes,
                "causalqwen::StaticConfig: the <NUM> token id must be one of the OvR classes.");

  static constexpr std::size_t vocab_size = Vocab, hidden_size = Hidden, causal_size = Causal,
                               intermediate_size = Intermediate, num_layers = Layers,
                               num_heads = Heads, num_kv_heads = KvHeads, num_classes = Classes,
                               num_token_id = NumToken, head_dim = Hidden / Heads;

  /// The same shapes as a CausalConfig (the other settings at their defaults).
  static CausalConfig runtime() {
    CausalConfig c;
    c.backbone = {Vocab, Hidden, Intermediate, Layers, Heads, KvHeads, 1e-6, 1e6};
    c.causal_size = Causal;
    c.num_classes = Classes;
    c.num_token_id = static_cast<std::int64_t>(NumToken);
    return c;
  }
};

/// One batch, [B,S] each; empty views take their defaults (numeric_values 0, attention_mask
/// all 1, position_ids 0…S−1, target_values 0).
template <class T>
struct Batch {
  TensorView<const std::int64_t, 2> input_ids;
  TensorView<const T, 2> numeric_values;
  TensorView<const std::int64_t, 2> attention_mask;
  TensorView<const std::int64_t, 2> labels;
  TensorView<const T, 2> target_values;
  TensorView<const std::int64_t, 2> position_ids;
};

template <class T, class Config = RuntimeConfig>
class CausalQwen;

template <class T>
class CausalQwen<T, RuntimeConfig> {
 public:
  struct Cache {
    typename nn::Transformer<T>::Cache backbone;
    typename CausalHead<T>::Cache head;
    std::vector<T> dz;  // [M,H] backward scratch
  };

  explicit CausalQwen(CausalConfig config, std::size_t class_chunk = 2048)
      : cfg_(validated(std::move(config))),
        backbone_(cfg_.backbone, [this](Layout& l) { add_head_params(l, cfg_); }),
        head_(cfg_, class_chunk) {}

  const CausalConfig& config() const { return cfg_; }
  nn::Transformer<T>& backbone() { return backbone_; }
  const nn::Transformer<T>& backbone() const { return backbone_; }
  CausalHead<T>& head() { return head_; }
  /// Changes α of the regression gate for the next steps (see CausalHead::set_alpha_gate).
  void set_alpha_gate(double alpha) {
    head_.set_alpha_gate(alpha);
    cfg_.alpha_gate = alpha;
  }
  Arena<T>& params() { return backbone_.params(); }
  const Arena<T>& params() const { return backbone_.params(); }
  const Layout& layout() const { return params().layout(); }
  /// A zeroed gradient arena with the parameters' layout.
  Arena<T> make_gradients() const { return backbone_.make_gradients(); }

  /// A model trained from scratch: backbone N(0, std²) (norms 1), direction random, cls.weight
  /// N(0, std²), and the heads' DESIGN §2 inits (W_loc = I, scale_U = γ_init, …).
  void init_random(std::uint64_t seed, double std = 0.02) {
    backbone_.init_random(seed, std);
    init_heads(params(), cfg_, seed);
    init_cls_random(params(), seed, std);
  }

  /// Forward only: the loss parts and metrics for `batch` (no gradients).
  HeadMetrics evaluate(const Batch<T>& batch, Cache& cache, ActionMode mode = ActionMode::deterministic,
                       SamplingNoise<T> noise = {}) {
    return run(batch, cache, nullptr, mode, noise);
  }

  /// Forward and backward: grads += ∂L_total/∂θ for every parameter; returns the metrics.
  HeadMetrics forward_backward(const Batch<T>& batch, Cache& cache, Arena<T>& grads,
                               ActionMode mode = ActionMode::deterministic, SamplingNoise<T> noise = {}) {
    detail::require(&grads.layout() == &layout() || grads.layout().total() == layout().total(),
                    "CausalQwen::forward_backward", "the gradient arena does not have the model's layout");
    return run(batch, cache, &grads, mode, noise);
  }

 private:
  static CausalConfig validated(CausalConfig c) {
    c.validate("CausalQwen");
    return c;
  }

  HeadMetrics run(const Batch<T>& b, Cache& cache, Arena<T>* grads, ActionMode mode, SamplingNoise<T> noise) {
    const std::size_t B = b.input_ids.shape[0], S = b.input_ids.shape[1], M = B * S, H = cfg_.hidden_size();
    require_shape(b.labels, {B, S}, "CausalQwen", "labels");
    if (!b.target_values.empty()) require_shape(b.target_values, {B, S}, "CausalQwen", "target_values");
    for (auto id : b.input_ids)
      detail::require(id >= 0 && static_cast<std::size_t>(id) < cfg_.backbone.vocab_size, "CausalQwen",
                      "input id {} is outside the vocabulary [0, {})", id, cfg_.backbone.vocab_size);
    const auto z = backbone_.forward(b.input_ids, b.numeric_values, b.attention_mask, b.position_ids, cache.backbone);
    const HeadTargets<T> targets{b.labels.reshape(Shape<1>{M}),
                                 b.target_values.empty() ? TensorView<const T, 1>{} : b.target_values.reshape(Shape<1>{M}),
                                 b.attention_mask.empty() ? TensorView<const std::int64_t, 1>{}
                                                          : b.attention_mask.reshape(Shape<1>{M})};
    const Arena<T>& p = params();
    const auto hp = HeadParams<const T>::bind(p);
    if (!grads) return head_.run(hp, p.version(), z.flat2d(), targets, mode, noise, cache.head);
    cache.dz.assign(M * H, T(0));
    const auto g = HeadParams<T>::bind(*grads);
    const auto metrics = head_.run(hp, p.version(), z.flat2d(), targets, mode, noise, cache.head, &g,
                                   {cache.dz.data(), {M, H}});
    backbone_.backward(cache.backbone, TensorView<const T, 3>(cache.dz.data(), {B, S, H}), *grads);
    return metrics;
  }

  CausalConfig cfg_;
  nn::Transformer<T> backbone_;
  CausalHead<T> head_;
};

/// The compile-time-configured model: the same implementation, shapes fixed by Config.
template <class T, class Config>
class CausalQwen : public CausalQwen<T, RuntimeConfig> {
 public:
  using config_type = Config;
  static constexpr std::size_t hidden_size = Config::hidden_size, causal_size = Config::causal_size,
                               num_classes = Config::num_classes, vocab_size = Config::vocab_size;
  explicit CausalQwen(std::size_t class_chunk = 2048)
      : CausalQwen<T, RuntimeConfig>(Config::runtime(), class_chunk) {}
  /// Settings other than shapes (thresholds, α, λ, …) may still be changed at run time.
  explicit CausalQwen(const CausalConfig& settings, std::size_t class_chunk = 2048)
      : CausalQwen<T, RuntimeConfig>(with_static_shapes(settings), class_chunk) {}

 private:
  static CausalConfig with_static_shapes(CausalConfig c) {
    const auto s = Config::runtime();
    c.backbone.vocab_size = s.backbone.vocab_size;
    c.backbone.hidden_size = s.backbone.hidden_size;
    c.backbone.intermediate_size = s.backbone.intermediate_size;
    c.backbone.num_layers = s.backbone.num_layers;
    c.backbone.num_heads = s.backbone.num_heads;
    c.backbone.num_kv_heads = s.backbone.num_kv_heads;
    c.causal_size = s.causal_size;
    c.num_classes = s.num_classes;
    c.num_token_id = s.num_token_id;
    return c;
  }
};

}  // namespace causalqwen::model
