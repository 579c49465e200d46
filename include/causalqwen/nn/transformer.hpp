/// The Qwen2 decoder stack with CausalQwen's numeric embedding in front:
///   e = NumericEmbedding(input_ids, numeric_values)  → DecoderBlock × L → RMSNorm → z [B,S,H]
/// Parameters live in one arena whose slots carry Hugging Face names
/// (`model.embed_tokens.weight`, `model.layers.{i}.self_attn.q_proj.weight`, …, `model.norm.weight`)
/// plus `causal.num_direction`; gradients live in a second arena with the same layout.
/// forward runs a static tape (embedding, blocks, final norm) as a fold; backward folds back.
/// forward_cached is the inference path: the new tokens of a step against a KV cache.
#pragma once
#include "causalqwen/autodiff/static_tape.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/nn/cached_block.hpp"
#include "causalqwen/nn/config.hpp"
#include "causalqwen/nn/kv_cache.hpp"
#include "causalqwen/nn/decoder_block.hpp"
#include "causalqwen/nn/numeric_embedding.hpp"
#include "causalqwen/nn/rmsnorm.hpp"
#include "causalqwen/nn/rope.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace causalqwen::nn {

template <class T>
class Transformer {
 public:
  /// Everything forward keeps for backward: the activation arena (reallocated only when a
  /// larger B·S arrives), copies of the integer inputs, the RoPE table, per-layer caches.
  struct Cache {
    std::size_t batch = 0, seq = 0;
    Arena<T> acts;       // activations
    Arena<T> workspace;  // backward scratch, shared by the layers
    std::vector<std::int64_t> ids, mask, positions;  // [B,S]
    bool has_mask = false;
    typename RotaryEmbedding<T>::Table rope;
    typename NumericEmbedding<T>::Cache embed;
    std::vector<typename DecoderBlock<T>::Cache> blocks;
    typename DecoderBlock<T>::Workspace block_ws;
    typename RMSNorm<T>::Cache final_norm;
    TensorView<T, 2> hidden0, z;  // [M,H] embedding output, final output
    std::vector<TensorView<T, 2>> layer_out;  // [M,H] output of each block
  };

  /// `extra_slots`, when given, appends further named slots to the parameter layout (a model
  /// built on the transformer, e.g. CausalQwen's heads, keeps all its parameters in one arena).
  explicit Transformer(TransformerConfig config, const std::function<void(Layout&)>& extra_slots = {})
      : config_(validated(config)), block_(config_) {
    auto layout = std::make_shared<Layout>();
    layout->add("model.embed_tokens.weight", {config_.vocab_size, config_.hidden_size});
    layout->add("causal.num_direction", {config_.hidden_size});
    for (std::size_t i = 0; i < config_.num_layers; ++i) block_.add_params(*layout, layer_prefix(i));
    layout->add("model.norm.weight", {config_.hidden_size});
    if (extra_slots) extra_slots(*layout);
    layout_ = layout;
    params_.reset(layout_);
  }

  const TransformerConfig& config() const { return config_; }
  std::shared_ptr<const Layout> layout() const { return layout_; }
  Arena<T>& params() { return params_; }
  const Arena<T>& params() const { return params_; }
  /// A zeroed gradient arena with the parameters' layout.
  Arena<T> make_gradients() const { return Arena<T>(layout_); }
  /// A parameter by its Hugging Face name.
  template <std::size_t N>
  TensorView<T, N> param(const std::string& name) { return params_.template view<N>(name); }
  static std::string layer_prefix(std::size_t i) { return "model.layers." + std::to_string(i) + "."; }

  /// Norm weights 1, every matrix and bias N(0, std²), the numeric direction N(0,1):
  /// a reproducible random model for tests and benchmarks.
  void init_random(std::uint64_t seed, double std = 0.02) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (const auto& s : layout_->slots()) {
      auto span = params_.slot_span(s.name);
      const bool is_norm = s.name.find("layernorm") != std::string::npos || s.name == "model.norm.weight";
      for (auto& v : span)
        v = is_norm ? T(1)
                    : static_cast<T>(s.name == "causal.num_direction" ? normal(rng) : std * normal(rng));
    }
    params_.touch();
  }

  /// z [B,S,H] = Transformer(input_ids [B,S], numeric_values [B,S]), keys masked by causality
  /// and attention_mask [B,S] (1 = token, 0 = padding; empty = all tokens), rotary positions
  /// position_ids [B,S] (empty = 0…S−1 in every row). The result views `cache`.
  TensorView<const T, 3> forward(TensorView<const std::int64_t, 2> input_ids,
                                 TensorView<const T, 2> numeric_values,
                                 TensorView<const std::int64_t, 2> attention_mask,
                                 TensorView<const std::int64_t, 2> position_ids, Cache& cache) const {
    const std::size_t B = input_ids.shape[0], S = input_ids.shape[1];
    detail::require(B > 0 && S > 0, "Transformer::forward", "input_ids {} is empty",
                    shape_string(input_ids.shape));
    if (!numeric_values.empty()) require_shape(numeric_values, {B, S}, "Transformer::forward", "numeric_values");
    if (!attention_mask.empty()) require_shape(attention_mask, {B, S}, "Transformer::forward", "attention_mask");
    if (!position_ids.empty()) require_shape(position_ids, {B, S}, "Transformer::forward", "position_ids");
    prepare(cache, B, S);
    cache.ids.assign(input_ids.begin(), input_ids.end());
    cache.has_mask = !attention_mask.empty();
    if (cache.has_mask) {
      for (auto v : attention_mask)
        detail::require(v == 0 || v == 1, "Transformer::forward", "attention_mask must hold 0 or 1, got {}", v);
      cache.mask.assign(attention_mask.begin(), attention_mask.end());
    }
    cache.positions.resize(B * S);
    for (std::size_t m = 0; m < B * S; ++m)
      cache.positions[m] = position_ids.empty() ? static_cast<std::int64_t>(m % S) : position_ids[m];
    Context ctx{this, &cache, nullptr, {}, {}, numeric_values};
    tape_.forward(ctx);
    return cache.z.reshape(Shape<3>{B, S, config_.hidden_size});
  }

  /// grads += ∂L/∂θ for every parameter, from dz = ∂L/∂z [B,S,H]; optionally
  /// dnumeric [B,S] += ∂L/∂numeric_values.
  void backward(Cache& cache, TensorView<const T, 3> dz, Arena<T>& grads,
                TensorView<T, 2> dnumeric = {}) const {
    require_shape(dz, {cache.batch, cache.seq, config_.hidden_size}, "Transformer::backward", "dz");
    detail::require(grads.size() == params_.size() && grads.layout().slots().size() == layout_->slots().size(),
                    "Transformer::backward", "the gradient arena does not have the model's layout "
                    "(make it with make_gradients())");
    if (!dnumeric.empty()) require_shape(dnumeric, {cache.batch, cache.seq}, "Transformer::backward", "dnumeric");
    Context ctx{this, &cache, &grads, dz.flat2d(), dnumeric, {}};
    tape_.backward(ctx);
  }

  /// What incremental decoding keeps between steps: the KV cache and scratch for the new tokens.
  struct InferenceState {
    KvCache<T> kv;
    CachedBlockWorkspace<T> blocks;
    typename NumericEmbedding<T>::Cache embed;
    typename RotaryEmbedding<T>::Table rope;
    std::vector<T> hidden_a, hidden_b, z, inv_rms;  // [M,H] ×3, [M]
    std::vector<std::int64_t> ids, positions;        // [M]
  };

  /// Starts an empty cache for `batch` rows with room for `slots` tokens per row.
  void begin_inference(InferenceState& state, std::size_t batch, std::size_t slots = 0) const {
    state.kv.reset(batch, config_.num_layers, config_.num_kv_heads, config_.head_dim(), slots);
  }

  /// z [B,S,H] for S new tokens per row (input_ids, numeric_values [B,S]) appended to the cache:
  /// token s of row b takes slot L+s (L = state.kv.length), attends to the row's earlier slots
  /// whose mask is 1 and to itself, at rotary position position_ids[b,s]. attention_mask [B,S]
  /// (empty = all 1) marks padding; empty position_ids continue each row's count of real tokens
  /// (state.kv.positions). Equal, position by position, to forward() on the whole sequence with
  /// the concatenated masks and positions. The result views `state` (valid until the next call).
  TensorView<const T, 3> forward_cached(TensorView<const std::int64_t, 2> input_ids,
                                        TensorView<const T, 2> numeric_values,
                                        TensorView<const std::int64_t, 2> attention_mask,
                                        TensorView<const std::int64_t, 2> position_ids,
                                        InferenceState& state) const {
    auto& kv = state.kv;
    const std::size_t B = input_ids.shape[0], S = input_ids.shape[1], M = B * S, H = config_.hidden_size;
    detail::require(kv.batch == B && kv.num_layers == config_.num_layers, "Transformer::forward_cached",
                    "the cache holds {} rows (call begin_inference for a batch of {})", kv.batch, B);
    detail::require(S > 0, "Transformer::forward_cached", "no new tokens");
    if (!numeric_values.empty()) require_shape(numeric_values, {B, S}, "Transformer::forward_cached", "numeric_values");
    if (!attention_mask.empty()) require_shape(attention_mask, {B, S}, "Transformer::forward_cached", "attention_mask");
    if (!position_ids.empty()) require_shape(position_ids, {B, S}, "Transformer::forward_cached", "position_ids");
    kv.make_room(S);
    const std::size_t L = kv.length;
    state.ids.assign(input_ids.begin(), input_ids.end());
    state.positions.resize(M);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t s = 0; s < S; ++s) {
        const std::size_t m = b * S + s;
        const std::int64_t keep = attention_mask.empty() ? 1 : attention_mask[m];
        detail::require(keep == 0 || keep == 1, "Transformer::forward_cached",
                        "attention_mask must hold 0 or 1, got {}", keep);
        kv.mask[b * kv.capacity + L + s] = keep;
        state.positions[m] = position_ids.empty() ? kv.positions[b] : position_ids[m];
        if (keep) kv.positions[b] = state.positions[m] + 1;
      }
    for (auto* v : {&state.hidden_a, &state.hidden_b, &state.z}) v->resize(M * H);
    state.inv_rms.resize(M);
    auto& p = const_cast<Arena<T>&>(params_);
    NumericEmbedding<T>::forward({p.template view<2>("model.embed_tokens.weight"), p.template view<1>("causal.num_direction")},
                                 TensorView<const std::int64_t, 1>(state.ids.data(), {M}),
                                 numeric_values.empty() ? TensorView<const T, 1>{} : numeric_values.reshape(Shape<1>{M}),
                                 TensorView<T, 2>(state.hidden_a.data(), {M, H}), state.embed);
    block_.rope().build(TensorView<const std::int64_t, 1>(state.positions.data(), {M}), state.rope);
    T* in = state.hidden_a.data();
    T* out = state.hidden_b.data();
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      decoder_block_cached(block_, block_.bind_params(p, layer_prefix(i)), i, TensorView<const T, 2>(in, {M, H}),
                           TensorView<T, 2>(out, {M, H}), B, S, state.rope, kv, state.blocks);
      std::swap(in, out);
    }
    kv.length = L + S;
    typename RMSNorm<T>::Cache norm{{}, {state.inv_rms.data(), {M}}};
    RMSNorm<T>::forward({p.template view<1>("model.norm.weight")}, static_cast<T>(config_.rms_norm_eps),
                        TensorView<const T, 2>(in, {M, H}), TensorView<T, 2>(state.z.data(), {M, H}), norm);
    return TensorView<const T, 3>(state.z.data(), {B, S, H});
  }

  /// Bytes of one activation cache for B×S tokens (activations + backward scratch).
  std::size_t activation_bytes(std::size_t batch, std::size_t seq) const {
    Layout a, w;
    add_activations(a, batch, seq);
    block_.add_workspace(w, batch, seq);
    return (a.total() + w.total()) * sizeof(T);
  }

 private:
  struct Context {
    const Transformer* model;
    Cache* cache;
    Arena<T>* grads;  // null in forward
    TensorView<const T, 2> dz;
    TensorView<T, 2> dnumeric;
    TensorView<const T, 2> numeric;
  };

  /// Stage 1: e = NumericEmbedding(ids, v) and the RoPE table.
  struct EmbedStage {
    void forward(Context& x) const {
      auto& c = *x.cache;
      const std::size_t M = c.batch * c.seq;
      auto& p = const_cast<Arena<T>&>(x.model->params_);
      const TensorView<const std::int64_t, 1> ids(c.ids.data(), {M});
      NumericEmbedding<T>::forward({p.template view<2>("model.embed_tokens.weight"), p.template view<1>("causal.num_direction")},
                                   ids, x.numeric.empty() ? TensorView<const T, 1>{} : x.numeric.reshape(Shape<1>{M}),
                                   c.hidden0, c.embed);
      x.model->block_.rope().build(TensorView<const std::int64_t, 1>(c.positions.data(), {M}), c.rope);
    }
    void backward(Context& x) const {
      auto& c = *x.cache;
      auto& g = *x.grads;
      const std::size_t M = c.batch * c.seq;
      auto d_hidden = c.workspace.template view<2>(x.model->config_.num_layers % 2 ? "ws.dres_b" : "ws.dres_a");
      NumericEmbedding<T>::backward({g.template view<2>("model.embed_tokens.weight"), g.template view<1>("causal.num_direction")},
                                    c.embed, d_hidden,
                                    x.dnumeric.empty() ? TensorView<T, 1>{} : x.dnumeric.reshape(Shape<1>{M}));
    }
  };
  /// Stage 2: the decoder layers in order (backward: in reverse, ping-ponging two buffers).
  struct BlocksStage {
    void forward(Context& x) const {
      auto& c = *x.cache;
      auto& p = const_cast<Arena<T>&>(x.model->params_);
      const std::size_t B = c.batch, S = c.seq;
      const TensorView<const std::int64_t, 2> mask =
          c.has_mask ? TensorView<const std::int64_t, 2>(c.mask.data(), {B, S}) : TensorView<const std::int64_t, 2>{};
      TensorView<T, 2> in = c.hidden0;
      for (std::size_t i = 0; i < x.model->config_.num_layers; ++i) {
        x.model->block_.forward(x.model->block_.bind_params(p, layer_prefix(i)), in, c.layer_out[i], mask,
                                c.rope, c.blocks[i], c.block_ws);
        in = c.layer_out[i];
      }
    }
    void backward(Context& x) const {
      auto& c = *x.cache;
      auto& p = const_cast<Arena<T>&>(x.model->params_);
      auto& g = *x.grads;
      auto a = c.workspace.template view<2>("ws.dres_a"), b = c.workspace.template view<2>("ws.dres_b");
      // dres_a holds dL/d(output of the last layer); layer i writes dL/d(its input) into the other.
      for (std::size_t k = 0; k < x.model->config_.num_layers; ++k) {
        const std::size_t i = x.model->config_.num_layers - 1 - k;
        std::fill(b.begin(), b.end(), T(0));
        x.model->block_.backward(x.model->block_.bind_params(p, layer_prefix(i)),
                                 x.model->block_.bind_params(g, layer_prefix(i)), c.blocks[i], a, b,
                                 c.block_ws);
        std::swap(a, b);
      }
    }
  };
  /// Stage 3: z = RMSNorm(last hidden).
  struct FinalNormStage {
    void forward(Context& x) const {
      auto& c = *x.cache;
      auto& p = const_cast<Arena<T>&>(x.model->params_);
      const auto& cfg = x.model->config_;
      const TensorView<T, 2> last = cfg.num_layers ? c.layer_out[cfg.num_layers - 1] : c.hidden0;
      RMSNorm<T>::forward({p.template view<1>("model.norm.weight")}, static_cast<T>(cfg.rms_norm_eps), last, c.z,
                          c.final_norm);
    }
    void backward(Context& x) const {
      auto& c = *x.cache;
      auto& p = const_cast<Arena<T>&>(x.model->params_);
      auto d_last = c.workspace.template view<2>("ws.dres_a");
      std::fill(d_last.begin(), d_last.end(), T(0));
      RMSNorm<T>::backward({p.template view<1>("model.norm.weight")}, {x.grads->template view<1>("model.norm.weight")},
                           c.final_norm, x.dz, d_last);
    }
  };

  static TransformerConfig validated(TransformerConfig c) {
    c.validate("Transformer");
    return c;
  }

  void add_activations(Layout& layout, std::size_t B, std::size_t S) const {
    const std::size_t M = B * S, H = config_.hidden_size;
    layout.add("hidden0", {M, H});
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      block_.add_activations(layout, layer_prefix(i), B, S);
      layout.add(layer_prefix(i) + "out", {M, H});
    }
    layout.add("final.inv_rms", {M});
    layout.add("z", {M, H});
  }

  /// Lays the caches out for B×S tokens (no allocation when the shape is unchanged).
  void prepare(Cache& c, std::size_t B, std::size_t S) const {
    if (c.batch == B && c.seq == S && c.blocks.size() == config_.num_layers) return;
    auto acts = std::make_shared<Layout>();
    add_activations(*acts, B, S);
    c.acts.reset(acts);
    auto ws = std::make_shared<Layout>();
    block_.add_workspace(*ws, B, S);
    ws->add("ws.dres_a", {B * S, config_.hidden_size});
    ws->add("ws.dres_b", {B * S, config_.hidden_size});
    c.workspace.reset(ws);
    c.batch = B;
    c.seq = S;
    c.hidden0 = c.acts.template view<2>("hidden0");
    c.blocks.clear();
    c.layer_out.clear();
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      c.blocks.push_back(block_.bind_cache(c.acts, layer_prefix(i), B, S));
      c.layer_out.push_back(c.acts.template view<2>(layer_prefix(i) + "out"));
    }
    c.final_norm.inv_rms = c.acts.template view<1>("final.inv_rms");
    c.z = c.acts.template view<2>("z");
    block_.bind_workspace(c.workspace, c.block_ws);
  }

  TransformerConfig config_;
  DecoderBlock<T> block_;
  std::shared_ptr<const Layout> layout_;
  Arena<T> params_;
  mutable autodiff::StaticTape<EmbedStage, BlocksStage, FinalNormStage> tape_;
};

}  // namespace causalqwen::nn
