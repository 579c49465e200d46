/// The Qwen2 decoder stack on given embeddings:
///   e [B,S,H] → DecoderBlock × L → RMSNorm → z [B,S,H]
/// The stack owns no parameters: they are slots of the caller's arena with Hugging Face names
/// (`model.layers.{i}.self_attn.q_proj.weight`, …, `model.norm.weight`; add_params lays them
/// out), gradients a second arena with the same layout. What comes before (a token embedding, a
/// numeric embedding) and after (an LM head, CausalQwen's heads) belongs to the model.
///
///   forward / backward   training: every activation kept in the cache's arena
///   forward_cached       inference: the new tokens of a step against a KV cache, through the
///                        same DecoderBlock::forward (activations in a scratch arena)
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/weight.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"
#include "causalqwen/nn/config.hpp"
#include "causalqwen/nn/decoder_block.hpp"
#include "causalqwen/nn/kv_cache.hpp"
#include "causalqwen/nn/rmsnorm.hpp"
#include "causalqwen/nn/rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::nn {

/// Norm weights 1 (slots named `…layernorm…` and `model.norm.weight`), slots listed in
/// `unit_normal` N(0,1), every other slot N(0, std²), drawn in layout order from one stream:
/// a reproducible random model for tests and benchmarks.
template <class T>
void init_random(Arena<T>& params, std::uint64_t seed, double std = 0.02, const std::vector<std::string>& unit_normal = {}) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto& s : params.layout().slots()) {
    const bool is_norm = s.name.find("layernorm") != std::string::npos || s.name == "model.norm.weight";
    const bool unit = std::find(unit_normal.begin(), unit_normal.end(), s.name) != unit_normal.end();
    for (auto& v : params.slot_span(s.name)) v = is_norm ? T(1) : static_cast<T>(unit ? normal(rng) : std * normal(rng));
  }
  params.touch();
}

template <class T>
class Transformer {
 public:
  /// Views of every layer's slots and of the final norm in one arena (parameters or gradients),
  /// made once and kept: binding by name builds the slot names anew (string allocations on
  /// every step). Rebound when the arena moves or is laid out anew.
  struct BoundArena {
    const T* data = nullptr;
    std::shared_ptr<const Layout> layout;  // kept alive, so that its address names this layout
    std::vector<typename DecoderBlock<T>::Params> layers;
    TensorView<T, 1> final_norm;  // [H]
  };

  /// Everything forward keeps for backward: the activation arena (reallocated only when a
  /// larger B·S arrives), the mask and positions, the RoPE table, per-layer caches.
  struct Cache {
    std::size_t batch = 0, seq = 0;
    Arena<T> acts;       // activations
    Arena<T> workspace;  // backward scratch, shared by the layers
    std::vector<std::int64_t> mask, positions;  // [B,S]
    bool has_mask = false;
    typename RotaryEmbedding<T>::Table rope;
    std::vector<typename DecoderBlock<T>::Cache> blocks;
    typename DecoderBlock<T>::Workspace block_ws;
    typename RMSNorm<T>::Cache final_norm;
    BoundArena bound_params, bound_grads;
    TensorView<const T, 2> input;             // [M,H] the embeddings of the last forward
    TensorView<T, 2> z;                       // [M,H] final output
    std::vector<TensorView<T, 2>> layer_out;  // [M,H] output of each block
    /// The forms of the layers' weights in the next forward and its backward (num_weights per
    /// layer in weight_matrices' order, or empty: float products of the weights;
    /// linalg/weight.hpp), as a linalg::WeightStore hands them out: the precision of their
    /// products (bf16: mixed precision, float models only) and bf16 copies that those products
    /// read instead of rounding the weights, given only while they hold the current weights.
    std::span<const linalg::WeightForms> forms;
    /// Whether the next forward keeps the attention weights P that backward reads ([B, nkv, S,
    /// G, S] per layer: 22 GB for a 4,096-token row of Qwen2.5-0.5B). An evaluation sets it to
    /// false: a cache laid out for it then holds no P, and attention keeps one 64-token block of
    /// P at a time, with the same results (a cache laid out with P keeps its layout).
    bool keep_for_backward = true;
    bool laid_with_probs = false;  // the layout of `acts` holds P
  };

  /// What incremental decoding keeps between steps: the KV cache and scratch for the new tokens.
  struct InferenceState {
    KvCache<T> kv;
    std::size_t rows = 0;  // M the scratch is laid out for
    Arena<T> scratch;      // one layer's activations for M rows, shared by the layers
    typename DecoderBlock<T>::Cache block;
    typename DecoderBlock<T>::Workspace block_ws;
    typename RotaryEmbedding<T>::Table rope;
    std::vector<T> hidden_a, hidden_b, z, inv_rms;  // [M,H] ×3, [M]
    std::vector<std::int64_t> positions;            // [M]
    BoundArena bound_params;
  };

  explicit Transformer(TransformerConfig config) : config_(validated(config)), block_(config_) {}

  const TransformerConfig& config() const { return config_; }
  static std::string layer_prefix(std::size_t i) { return "model.layers." + std::to_string(i) + "."; }

  /// Adds the stack's slots (every layer, then `model.norm.weight`) to `layout`.
  void add_params(Layout& layout) const {
    for (std::size_t i = 0; i < config_.num_layers; ++i) block_.add_params(layout, layer_prefix(i));
    layout.add("model.norm.weight", {config_.hidden_size});
  }

  /// z [B,S,H] = the stack applied to the embeddings e [B,S,H], keys masked by causality and
  /// attention_mask [B,S] (1 = token, 0 = padding; empty = all tokens), rotary positions
  /// position_ids [B,S] (empty = 0…S−1 in every row). `e` must stay alive until backward; the
  /// result views `cache`.
  TensorView<const T, 3> forward(const Arena<T>& params, TensorView<const T, 3> e,
                                 TensorView<const std::int64_t, 2> attention_mask,
                                 TensorView<const std::int64_t, 2> position_ids, Cache& cache) const {
    const std::size_t B = e.shape[0], S = e.shape[1], M = B * S;
    detail::require(B > 0 && S > 0, "Transformer::forward", "the input {} is empty", shape_text(e.shape));
    require_shape(e, {B, S, config_.hidden_size}, "Transformer::forward", "embeddings");
    if (!attention_mask.empty()) require_shape(attention_mask, {B, S}, "Transformer::forward", "attention_mask");
    if (!position_ids.empty()) require_shape(position_ids, {B, S}, "Transformer::forward", "position_ids");
    prepare(cache, B, S);
    cache.has_mask = !attention_mask.empty();
    if (cache.has_mask) {
      for (auto v : attention_mask)
        detail::require(v == 0 || v == 1, "Transformer::forward", "attention_mask must hold 0 or 1, got {}", v);
      cache.mask.assign(attention_mask.begin(), attention_mask.end());
    }
    cache.positions.resize(M);
    for (std::size_t m = 0; m < M; ++m)
      cache.positions[m] = position_ids.empty() ? static_cast<std::int64_t>(m % S) : position_ids[m];
    block_.rope().build(TensorView<const std::int64_t, 1>(cache.positions.data(), {M}), cache.rope);
    cache.input = e.flat2d();
    auto& p = bind(params, cache.bound_params);
    use_forms(p, cache.forms, "Transformer::forward");
    const TensorView<const std::int64_t, 2> mask =
        cache.has_mask ? TensorView<const std::int64_t, 2>(cache.mask.data(), {B, S}) : TensorView<const std::int64_t, 2>{};
    TensorView<const T, 2> in = cache.input;
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      block_.forward(p.layers[i], in, cache.layer_out[i], mask, cache.rope, cache.blocks[i], cache.block_ws);
      in = cache.layer_out[i];
    }
    RMSNorm<T>::forward({p.final_norm}, static_cast<T>(config_.rms_norm_eps), in, cache.z, cache.final_norm);
    return TensorView<const T, 3>(cache.z.data, {B, S, config_.hidden_size});
  }

  /// grads += ∂L/∂θ for every slot of the stack, from dz = ∂L/∂z [B,S,H] (weight products
  /// offered to the target's sink first). Returns ∂L/∂e [M,H] (a view of the cache's scratch,
  /// valid until the next call).
  TensorView<const T, 2> backward(const Arena<T>& params, Cache& cache, TensorView<const T, 3> dz,
                                  linalg::GradientTarget<T> grads) const {
    require_shape(dz, {cache.batch, cache.seq, config_.hidden_size}, "Transformer::backward", "dz");
    detail::require(cache.laid_with_probs, "Transformer::backward",
                    "the forward pass kept no attention weights (Cache::keep_for_backward was false): run it again with true");
    detail::require(grads.arena.size() == params.size(), "Transformer::backward",
                    "the gradient arena does not have the parameters' layout (make it with make_gradients())");
    const auto& p = bind(params, cache.bound_params);
    const auto& g = bind(grads.arena, cache.bound_grads);
    // the final norm writes ∂L/∂(last layer's output) into dres_a; layer i writes ∂L/∂(its input) into the other
    auto a = cache.workspace.template view<2>("ws.dres_a"), b = cache.workspace.template view<2>("ws.dres_b");
    parallel_fill(a.data, a.size(), T(0));
    RMSNorm<T>::backward({p.final_norm}, {g.final_norm}, cache.final_norm, dz.flat2d(), a);
    // a slot's arena offset, from its bound view (no name lookup, no allocation)
    const auto offset_of = [&](const TensorView<T, 1>& slot) { return static_cast<std::size_t>(slot.data - grads.arena.data()); };
    grads.final_from(offset_of(g.final_norm));
    for (std::size_t k = 0; k < config_.num_layers; ++k) {
      const std::size_t i = config_.num_layers - 1 - k;
      parallel_fill(b.data, b.size(), T(0));
      block_.backward(p.layers[i], g.layers[i], cache.blocks[i], a, b, cache.block_ws, grads.sink);
      grads.final_from(offset_of(g.layers[i].input_norm));  // layer i's first slot
      std::swap(a, b);
    }
    return a;
  }

  /// Starts an empty cache for `batch` rows with room for `slots` tokens per row.
  void begin_inference(InferenceState& state, std::size_t batch, std::size_t slots = 0) const {
    state.kv.reset(batch, config_.num_layers, config_.num_kv_heads, config_.head_dim(), slots);
  }

  /// z [B,S,H] for the embeddings e [B,S,H] of S new tokens per row appended to the cache:
  /// token s of row b takes slot L+s (L = state.kv.length), attends to the row's earlier slots
  /// whose mask is 1 and to itself, at rotary position position_ids[b,s]. attention_mask [B,S]
  /// (empty = all 1) marks padding; empty position_ids continue each row's count of real tokens
  /// (state.kv.positions). Equal, position by position, to forward() on the whole sequence with
  /// the concatenated masks and positions. The result views `state` (valid until the next call).
  /// `forms` (num_weights per layer in weight_matrices' order, or empty): the layers' weights'
  /// forms, whose packed bf16 / int8 copies steps of a few rows read instead of the float
  /// weights (linalg/weight.hpp; a linalg::WeightStore's decoding_forms).
  TensorView<const T, 3> forward_cached(const Arena<T>& params, TensorView<const T, 3> e,
                                        TensorView<const std::int64_t, 2> attention_mask,
                                        TensorView<const std::int64_t, 2> position_ids, InferenceState& state,
                                        std::span<const linalg::WeightForms> forms = {}) const {
    auto& kv = state.kv;
    const std::size_t B = e.shape[0], S = e.shape[1], M = B * S, H = config_.hidden_size;
    detail::require(kv.batch == B && kv.num_layers == config_.num_layers, "Transformer::forward_cached",
                    "the cache holds {} rows (call begin_inference for a batch of {})", kv.batch, B);
    detail::require(S > 0, "Transformer::forward_cached", "no new tokens");
    require_shape(e, {B, S, H}, "Transformer::forward_cached", "embeddings");
    if (!attention_mask.empty()) require_shape(attention_mask, {B, S}, "Transformer::forward_cached", "attention_mask");
    if (!position_ids.empty()) require_shape(position_ids, {B, S}, "Transformer::forward_cached", "position_ids");
    auto& p = bind(params, state.bound_params);
    use_forms(p, forms, "Transformer::forward_cached");
    // keys and values in bf16 when the attention's products run in bf16 (converted once when the
    // weights changed type since the cache was filled)
    const bool bf16_attention = config_.num_layers > 0 && DecoderBlock<T>::attention_in_bf16(p.layers[0]);
    kv.use_storage(bf16_attention ? KvStorage::bf16 : KvStorage::f32);
    kv.make_room(S);
    const std::size_t L = kv.length;
    state.positions.resize(M);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t s = 0; s < S; ++s) {
        const std::size_t m = b * S + s;
        const std::int64_t keep = attention_mask.empty() ? 1 : attention_mask[m];
        detail::require(keep == 0 || keep == 1, "Transformer::forward_cached", "attention_mask must hold 0 or 1, got {}", keep);
        kv.mask[b * kv.capacity + L + s] = keep;
        state.positions[m] = position_ids.empty() ? kv.positions[b] : position_ids[m];
        if (keep) kv.positions[b] = state.positions[m] + 1;
      }
    prepare_inference(state, B, S);
    block_.rope().build(TensorView<const std::int64_t, 1>(state.positions.data(), {M}), state.rope);
    const T* in = e.data;
    T* out = state.hidden_a.data();
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      block_.forward(p.layers[i], TensorView<const T, 2>(in, {M, H}), TensorView<T, 2>(out, {M, H}), {}, state.rope,
                     state.block, state.block_ws, &kv, i);
      in = out;
      out = out == state.hidden_a.data() ? state.hidden_b.data() : state.hidden_a.data();
    }
    kv.length = L + S;
    typename RMSNorm<T>::Cache norm{{}, {state.inv_rms.data(), {M}}};
    RMSNorm<T>::forward({p.final_norm}, static_cast<T>(config_.rms_norm_eps), TensorView<const T, 2>(in, {M, H}),
                        TensorView<T, 2>(state.z.data(), {M, H}), norm);
    return TensorView<const T, 3>(state.z.data(), {B, S, H});
  }

  /// The matrices whose forms the layers read (a linalg::WeightStore registers them), views of
  /// `params`: DecoderBlock::num_weights per layer in DecoderBlock::Forms' order (q|k|v, o,
  /// gate, up, down), layer after layer.
  std::vector<TensorView<const T, 2>> weight_matrices(const Arena<T>& params) const {
    std::vector<TensorView<const T, 2>> out;
    out.reserve(DecoderBlock<T>::num_weights * config_.num_layers);
    auto& a = const_cast<Arena<T>&>(params);
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      auto layer = block_.bind_params(a, layer_prefix(i));
      for (const auto* w : DecoderBlock<T>::weights(layer)) out.emplace_back(w->values);
    }
    return out;
  }

  /// Bytes of one activation cache for B×S tokens (activations + backward scratch).
  std::size_t activation_bytes(std::size_t batch, std::size_t seq) const {
    Layout a, w;
    add_activations(a, batch, seq);
    block_.add_workspace(w, batch, seq);
    return (a.total() + w.total()) * sizeof(T);
  }

 private:
  static TransformerConfig validated(TransformerConfig c) {
    c.validate("Transformer");
    return c;
  }

  void add_activations(Layout& layout, std::size_t B, std::size_t S, bool with_probs = true) const {
    const std::size_t M = B * S, H = config_.hidden_size;
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      block_.add_activations(layout, layer_prefix(i), B, S, with_probs);
      layout.add(layer_prefix(i) + "out", {M, H});
    }
    layout.add("final.inv_rms", {M});
    layout.add("z", {M, H});
  }

  /// Lays the caches out for B×S tokens (no allocation when the shape is unchanged).
  void prepare(Cache& c, std::size_t B, std::size_t S) const {
    // a layout that keeps P serves an evaluation too (a training cache is not laid out anew
    // around each validation pass)
    if (c.batch == B && c.seq == S && c.blocks.size() == config_.num_layers && (c.laid_with_probs || !c.keep_for_backward))
      return;
    auto acts = std::make_shared<Layout>();
    add_activations(*acts, B, S, c.keep_for_backward);
    c.laid_with_probs = c.keep_for_backward;
    c.acts.reset(acts);
    auto ws = std::make_shared<Layout>();
    block_.add_workspace(*ws, B, S);
    ws->add("ws.dres_a", {B * S, config_.hidden_size});
    ws->add("ws.dres_b", {B * S, config_.hidden_size});
    c.workspace.reset(ws);
    c.batch = B;
    c.seq = S;
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

  /// The views of `arena`'s layers, rebuilt in `bound` only when the arena moved or was laid
  /// out anew since the last call.
  BoundArena& bind(const Arena<T>& arena, BoundArena& bound) const {
    if (bound.data == arena.data() && bound.layout.get() == &arena.layout() && bound.layers.size() == config_.num_layers)
      return bound;
    auto& a = const_cast<Arena<T>&>(arena);
    bound.layers.clear();
    for (std::size_t i = 0; i < config_.num_layers; ++i) bound.layers.push_back(block_.bind_params(a, layer_prefix(i)));
    bound.final_norm = a.template view<1>("model.norm.weight");
    bound.data = arena.data();
    bound.layout = arena.shared_layout();
    return bound;
  }

  /// Gives every layer of `p` its num_weights entries of `forms` (empty: none, f32 products),
  /// refusing bf16 products for a double stack and a count of entries other than the layers'.
  void use_forms(BoundArena& p, std::span<const linalg::WeightForms> forms, const char* fn) const {
    constexpr std::size_t W = DecoderBlock<T>::num_weights;
    detail::require(forms.empty() || forms.size() == W * config_.num_layers, fn,
                    "weight forms for {} matrices, the stack's {} layers have {}", forms.size(), config_.num_layers,
                    W * config_.num_layers);
    for (std::size_t i = 0; i < config_.num_layers; ++i) {
      typename DecoderBlock<T>::Forms f{};
      if (!forms.empty()) std::copy_n(forms.begin() + static_cast<std::ptrdiff_t>(i * W), W, f.begin());
      for (const auto& w : f) linalg::require_precision_fits<T>(w.precision, fn);
      DecoderBlock<T>::use_forms(p.layers[i], f);
    }
  }

  /// Lays the decoding scratch out for B×S new tokens: grown when M = B·S exceeds every
  /// earlier step's (a prefill, then one-row decoding steps, share one layout), views re-made
  /// only when B or S changes. No allocation in steady state.
  void prepare_inference(InferenceState& st, std::size_t B, std::size_t S) const {
    const std::size_t M = B * S, H = config_.hidden_size;
    if (M > st.rows) {
      auto layout = std::make_shared<Layout>();
      block_.add_activations(*layout, "", 1, M, /*with_probs=*/false);  // every slot [M,·]
      st.scratch.reset(layout);
      st.rows = M;
      for (auto* v : {&st.hidden_a, &st.hidden_b, &st.z}) v->resize(M * H);
      st.inv_rms.resize(M);
      st.block.batch = 0;  // re-bind below
    }
    if (st.block.batch != B || st.block.seq != S) st.block = block_.bind_cache(st.scratch, "", B, S);
  }

  TransformerConfig config_;
  DecoderBlock<T> block_;
};

}  // namespace causalqwen::nn
