/// One Qwen2 decoder layer (pre-norm, two residuals):
///   h1 = RMSNorm₁(x);  q|k|v = h1·Wqkvᵀ + bqkv;  RoPE(q, k);  a = Attention(q, k, v)
///   x2 = x + a·Woᵀ;    h2 = RMSNorm₂(x2);        y = x2 + SwiGLU(h2)
/// Parameters are slices of an arena laid out with Hugging Face names
/// (`<prefix>self_attn.q_proj.weight` …); q, k and v weights (and biases) are packed
/// contiguously so that one GEMM computes all three projections.
/// The same forward serves training (P and every activation kept in an arena for backward),
/// prefill and decoding: given a KvCache, the attention reads and extends it instead (the
/// activations then live in a scratch arena shared by the layers, nothing is kept). Decoding
/// steps of a few rows read each weight matrix once (linalg::linear_forward's few-rows kernel).
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/nn/attention.hpp"
#include "causalqwen/nn/config.hpp"
#include "causalqwen/nn/kv_cache.hpp"
#include "causalqwen/nn/linear.hpp"
#include "causalqwen/nn/rmsnorm.hpp"
#include "causalqwen/nn/rope.hpp"
#include "causalqwen/nn/swiglu.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace causalqwen::nn {

template <class T>
struct DecoderBlock {
  TransformerConfig config;

  struct Params {
    TensorView<T, 1> input_norm;          // [H]
    typename Linear<T>::Params qkv;       // weight [(nh+2nkv)·D, H], bias [(nh+2nkv)·D]
    typename Linear<T>::Params o_proj;    // weight [H, nh·D], no bias
    TensorView<T, 1> post_norm;           // [H]
    typename SwiGLU<T>::Params mlp;       // gate, up [F,H]; down [H,F]
  };
  /// The forms of the layer's matrices q|k|v, o, gate, up, down (in that order) besides their
  /// values (linalg/weight.hpp): packed copies for decoding, bf16 copies and the products'
  /// precision for mixed-precision training (default: none, f32).
  static constexpr std::size_t num_weights = 5;
  using Forms = std::array<linalg::WeightForms, num_weights>;
  struct Cache {
    std::size_t batch = 0, seq = 0;
    typename RMSNorm<T>::Cache norm1, norm2;
    typename Linear<T>::Cache qkv_in, o_in;
    typename CausalSelfAttention<T>::Cache attn;
    typename SwiGLU<T>::Cache mlp;
    TensorView<T, 2> h1, qkv, attn_out, x2, h2;  // [M,H], [M,(nh+2nkv)·D], [M,nh·D], [M,H], [M,H]
    const typename RotaryEmbedding<T>::Table* rope = nullptr;
  };
  /// Scratch, shared by all the layers of a stack.
  struct Workspace {
    TensorView<T, 2> dh, dqkv, dattn, dx2;  // [M,H], [M,(nh+2nkv)·D], [M,nh·D], [M,H]
    typename SwiGLU<T>::Workspace mlp;      // [M,F] ×3
    typename CausalSelfAttention<T>::Workspace attn;
  };

  explicit DecoderBlock(TransformerConfig c) : config(c) { config.validate("DecoderBlock"); }

  CausalSelfAttention<T> attention() const {
    return {config.num_heads, config.num_kv_heads, config.head_dim()};
  }
  RotaryEmbedding<T> rope() const { return {config.head_dim(), config.rope_theta}; }

  // ------------------------------------------------------------------ arenas
  /// Adds this layer's parameters to `layout` under `prefix` ("model.layers.3.").
  void add_params(Layout& layout, const std::string& prefix) const {
    const std::size_t H = config.hidden_size, D = config.head_dim(), F = config.intermediate_size;
    const std::size_t nq = config.num_heads * D, nkv = config.num_kv_heads * D;
    layout.add(prefix + "input_layernorm.weight", {H});
    layout.add(prefix + "self_attn.q_proj.weight", {nq, H});
    layout.add(prefix + "self_attn.k_proj.weight", {nkv, H}, Placement::packed);
    layout.add(prefix + "self_attn.v_proj.weight", {nkv, H}, Placement::packed);
    layout.add(prefix + "self_attn.q_proj.bias", {nq});
    layout.add(prefix + "self_attn.k_proj.bias", {nkv}, Placement::packed);
    layout.add(prefix + "self_attn.v_proj.bias", {nkv}, Placement::packed);
    layout.add(prefix + "self_attn.o_proj.weight", {H, nq});
    layout.add(prefix + "post_attention_layernorm.weight", {H});
    layout.add(prefix + "mlp.gate_proj.weight", {F, H});
    layout.add(prefix + "mlp.up_proj.weight", {F, H});
    layout.add(prefix + "mlp.down_proj.weight", {H, F});
  }
  /// Views of this layer's slots in `arena` (parameters or, with the same layout, gradients).
  Params bind_params(Arena<T>& arena, const std::string& prefix) const {
    const std::size_t H = config.hidden_size, Q = config.qkv_size();
    Params p;
    p.input_norm = arena.template view<1>(prefix + "input_layernorm.weight");
    p.qkv.weight = TensorView<T, 2>(arena.template view<2>(prefix + "self_attn.q_proj.weight").data, {Q, H});
    p.qkv.bias = TensorView<T, 1>(arena.template view<1>(prefix + "self_attn.q_proj.bias").data, {Q});
    p.o_proj.weight = arena.template view<2>(prefix + "self_attn.o_proj.weight");
    p.post_norm = arena.template view<1>(prefix + "post_attention_layernorm.weight");
    p.mlp.gate.weight = arena.template view<2>(prefix + "mlp.gate_proj.weight");
    p.mlp.up.weight = arena.template view<2>(prefix + "mlp.up_proj.weight");
    p.mlp.down.weight = arena.template view<2>(prefix + "mlp.down_proj.weight");
    return p;
  }
  /// The layer's weights that have forms, in Forms' order.
  static std::array<linalg::Weight<T>*, num_weights> weights(Params& p) {
    return {&p.qkv.weight, &p.o_proj.weight, &p.mlp.gate.weight, &p.mlp.up.weight, &p.mlp.down.weight};
  }
  /// Gives the layer's weights the forms `f` (attention's own products and the norms stay float).
  static void use_forms(Params& p, const Forms& f) {
    const auto w = weights(p);
    for (std::size_t k = 0; k < w.size(); ++k) w[k]->use_forms(f[k]);
  }
  /// Whether the layer's attention runs its products in bf16: beside an inference copy of the
  /// weights in bf16 or int8 (mixed-precision training, whose copies are bf16 too, keeps
  /// attention float). A KV cache then stores bf16 (KvStorage::bf16).
  static bool attention_in_bf16(const Params& p) {
    return std::is_same_v<T, float> && p.qkv.weight.decode.packed() && p.qkv.weight.precision == linalg::Format::f32;
  }
  /// Adds the activations kept for backward (for B×S tokens) to `layout`; without
  /// `with_probs` (decoding with a KvCache), the attention weights are not kept.
  void add_activations(Layout& layout, const std::string& prefix, std::size_t batch,
                       std::size_t seq, bool with_probs = true) const {
    const std::size_t M = batch * seq, H = config.hidden_size, F = config.intermediate_size;
    layout.add(prefix + "inv_rms1", {M});
    layout.add(prefix + "h1", {M, H});
    layout.add(prefix + "qkv", {M, config.qkv_size()});
    if (with_probs) {
      const auto ps = attention().probs_shape(batch, seq);
      layout.add(prefix + "probs", {ps.begin(), ps.end()});
    }
    layout.add(prefix + "attn", {M, config.num_heads * config.head_dim()});
    layout.add(prefix + "x2", {M, H});
    layout.add(prefix + "inv_rms2", {M});
    layout.add(prefix + "h2", {M, H});
    layout.add(prefix + "g", {M, F});
    layout.add(prefix + "u", {M, F});
    layout.add(prefix + "a", {M, F});
  }
  /// Views of the activations laid out by add_activations under `prefix` for B×S tokens; a
  /// layout made for more rows serves too (each view keeps its first B·S rows).
  Cache bind_cache(Arena<T>& acts, const std::string& prefix, std::size_t batch,
                   std::size_t seq) const {
    const std::size_t M = batch * seq;
    const auto rows = [&](TensorView<T, 2> v) {
      detail::require(v.shape[0] >= M, "DecoderBlock::bind_cache", "the activations hold {} rows, {} needed", v.shape[0], M);
      return TensorView<T, 2>(v.data, {M, v.shape[1]});
    };
    const auto first = [&](TensorView<T, 1> v) { return TensorView<T, 1>(v.data, {M}); };
    Cache c;
    c.batch = batch;
    c.seq = seq;
    c.norm1.inv_rms = first(acts.template view<1>(prefix + "inv_rms1"));
    c.h1 = rows(acts.template view<2>(prefix + "h1"));
    c.qkv = rows(acts.template view<2>(prefix + "qkv"));
    if (acts.layout().contains(prefix + "probs")) c.attn.probs = acts.template view<5>(prefix + "probs");
    c.attn_out = rows(acts.template view<2>(prefix + "attn"));
    c.x2 = rows(acts.template view<2>(prefix + "x2"));
    c.norm2.inv_rms = first(acts.template view<1>(prefix + "inv_rms2"));
    c.h2 = rows(acts.template view<2>(prefix + "h2"));
    c.mlp.g = rows(acts.template view<2>(prefix + "g"));
    c.mlp.u = rows(acts.template view<2>(prefix + "u"));
    c.mlp.a = rows(acts.template view<2>(prefix + "a"));
    return c;
  }
  /// Adds the backward scratch (for B×S tokens) to `layout`.
  void add_workspace(Layout& layout, std::size_t batch, std::size_t seq) const {
    const std::size_t M = batch * seq, H = config.hidden_size, F = config.intermediate_size;
    layout.add("ws.dh", {M, H});
    layout.add("ws.dqkv", {M, config.qkv_size()});
    layout.add("ws.dattn", {M, config.num_heads * config.head_dim()});
    layout.add("ws.dx2", {M, H});
    layout.add("ws.dg", {M, F});
    layout.add("ws.du", {M, F});
    layout.add("ws.da", {M, F});
  }
  void bind_workspace(Arena<T>& ws, Workspace& w) const {
    w.dh = ws.template view<2>("ws.dh");
    w.dqkv = ws.template view<2>("ws.dqkv");
    w.dattn = ws.template view<2>("ws.dattn");
    w.dx2 = ws.template view<2>("ws.dx2");
    w.mlp.dg = ws.template view<2>("ws.dg");
    w.mlp.du = ws.template view<2>("ws.du");
    w.mlp.da = ws.template view<2>("ws.da");
  }

  // ------------------------------------------------------------------ passes
  /// y [M,H] from x [M,H] (M = B·S, row m = token (m / S, m % S)); mask [B,S] may be empty.
  /// With `kv`, layer `layer` attends over the cache and appends its keys and values (the
  /// cache's mask, not `mask`, hides padding; see CausalSelfAttention::forward_cached).
  void forward(const Params& p, TensorView<const T, 2> x, TensorView<T, 2> y,
               TensorView<const std::int64_t, 2> mask,
               const typename RotaryEmbedding<T>::Table& rope_table, Cache& c, Workspace& w,
               KvCache<T>* kv = nullptr, std::size_t layer = 0) const {
    const std::size_t B = c.batch, S = c.seq, M = B * S, H = config.hidden_size;
    require_shape(x, {M, H}, "DecoderBlock::forward", "input");
    require_shape(y, {M, H}, "DecoderBlock::forward", "output");
    const T eps = static_cast<T>(config.rms_norm_eps);
    const std::size_t Q = config.qkv_size(), D = config.head_dim();
    RMSNorm<T>::forward({p.input_norm}, eps, x, c.h1, c.norm1);
    Linear<T>::forward(p.qkv, c.h1, c.qkv, c.qkv_in);
    const auto rope_ = rope();
    rope_.rotate(c.qkv.data, Q, 0, config.num_heads, rope_table);
    rope_.rotate(c.qkv.data, Q, config.num_heads * D, config.num_kv_heads, rope_table);
    c.rope = &rope_table;
    auto attention_ = attention();
    attention_.bf16_products = attention_in_bf16(p);
    if (kv)
      attention_.forward_cached(layer, c.qkv.data, B, S, *kv, c.attn_out.data, w.attn);
    else
      attention_.forward(c.qkv.reshape(Shape<3>{B, S, Q}), mask,
                         c.attn_out.reshape(Shape<3>{B, S, config.num_heads * D}), c.attn, w.attn);
    Linear<T>::forward(p.o_proj, c.attn_out, c.x2, c.o_in);
    autodiff::eval_add(c.x2, autodiff::constant(x));  // x2 = x + o
    RMSNorm<T>::forward({p.post_norm}, eps, c.x2, c.h2, c.norm2);
    SwiGLU<T>::forward(p.mlp, c.h2, y, c.mlp);
    autodiff::eval_add(y, autodiff::constant(TensorView<const T, 2>(c.x2)));  // y = x2 + mlp
  }

  /// dx += ∂L/∂x and every parameter gradient in `g` += its ∂L/∂θ, from dy [M,H] (weight
  /// products offered to `sink` first).
  void backward(const Params& p, const Params& g, const Cache& c, TensorView<const T, 2> dy,
                TensorView<T, 2> dx, Workspace& w, linalg::WeightGradSink<T>* sink = nullptr) const {
    const std::size_t B = c.batch, S = c.seq, Q = config.qkv_size(), D = config.head_dim();
    // y = x2 + mlp(h2)
    std::copy(dy.begin(), dy.end(), w.dx2.begin());
    parallel_fill(w.dh.data, w.dh.size(), T(0));
    SwiGLU<T>::backward(p.mlp, g.mlp, c.mlp, dy, w.dh, w.mlp, sink);
    RMSNorm<T>::backward({p.post_norm}, {g.post_norm}, c.norm2, w.dh, w.dx2);
    // x2 = x + o_proj(attn)
    parallel_fill(w.dattn.data, w.dattn.size(), T(0));
    Linear<T>::backward(p.o_proj, g.o_proj, c.o_in, w.dx2, w.dattn, sink);
    parallel_fill(w.dqkv.data, w.dqkv.size(), T(0));
    attention().backward(c.attn, w.dattn.reshape(Shape<3>{B, S, config.num_heads * D}),
                         w.dqkv.reshape(Shape<3>{B, S, Q}), w.attn);
    const auto rope_ = rope();
    rope_.rotate(w.dqkv.data, Q, 0, config.num_heads, *c.rope, -1);
    rope_.rotate(w.dqkv.data, Q, config.num_heads * D, config.num_kv_heads, *c.rope, -1);
    parallel_fill(w.dh.data, w.dh.size(), T(0));
    Linear<T>::backward(p.qkv, g.qkv, c.qkv_in, w.dqkv, w.dh, sink);
    RMSNorm<T>::backward({p.input_norm}, {g.input_norm}, c.norm1, w.dh, dx);
    autodiff::eval_add(dx, autodiff::constant(TensorView<const T, 2>(w.dx2)));
  }
};

}  // namespace causalqwen::nn
