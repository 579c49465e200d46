/// One decoder layer over the new tokens of a step, with its keys and values kept in a KvCache
/// (inference only): the formulas of DecoderBlock::forward,
///   h1 = RMSNorm₁(x);  q|k|v = h1·Wqkvᵀ + b;  RoPE(q, k);  append k, v;  a = CachedAttention(q)
///   x2 = x + a·Woᵀ;    y = x2 + SwiGLU(RMSNorm₂(x2))
/// on M = B·S_new rows, with scratch sized for M (nothing is kept for backward). A decode step
/// (M ≤ linalg::few_rows_max) reads each weight matrix once with the few-rows kernel
/// (linalg/gemv.hpp); a prefill uses the GEMMs of the full pass.
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/gemv.hpp"
#include "causalqwen/nn/cached_attention.hpp"
#include "causalqwen/nn/decoder_block.hpp"
#include "causalqwen/nn/kv_cache.hpp"

#include <vector>

namespace causalqwen::nn {

/// Scratch of the cached layers, sized for M new tokens and reused by every layer and step.
template <class T>
struct CachedBlockWorkspace {
  std::size_t rows = 0;
  std::vector<T> h1, qkv, attn, x2, h2, g, u, a, inv_rms;
  typename CachedAttention<T>::Workspace attention;

  void resize(std::size_t M, const TransformerConfig& c) {
    if (rows == M) return;
    rows = M;
    const std::size_t H = c.hidden_size, F = c.intermediate_size;
    for (auto* v : {&h1, &x2, &h2}) v->assign(M * H, T(0));
    qkv.assign(M * c.qkv_size(), T(0));
    attn.assign(M * c.num_heads * c.head_dim(), T(0));
    for (auto* v : {&g, &u, &a}) v->assign(M * F, T(0));
    inv_rms.assign(M, T(0));
  }
};

/// y = x·Wᵀ (+ b) for the M new rows of a step: the few-rows kernel up to few_rows_max rows,
/// the GEMM beyond.
template <class T>
void cached_linear(TensorView<T, 2> y, TensorView<const T, 2> x, TensorView<const T, 2> w,
                   TensorView<const T, 1> b = {}) {
  if (x.shape[0] <= linalg::few_rows_max)
    linalg::few_rows_linear_forward<T>(y, x, w, b);
  else
    linalg::linear_forward<T>(y, x, w, b);
}

/// y [B·S, H] = layer `layer` of `block` applied to x [B·S, H] (the new tokens of a step), their
/// keys and values appended to `kv` at slots kv.length … kv.length+S−1 (kv.length itself is
/// advanced by the caller once every layer has run). `rope` holds the new tokens' angles.
template <class T>
void decoder_block_cached(const DecoderBlock<T>& block, const typename DecoderBlock<T>::Params& p,
                          std::size_t layer, TensorView<const T, 2> x, TensorView<T, 2> y,
                          std::size_t batch, std::size_t seq, const typename RotaryEmbedding<T>::Table& rope,
                          KvCache<T>& kv, CachedBlockWorkspace<T>& w) {
  const auto& cfg = block.config;
  const std::size_t M = batch * seq, H = cfg.hidden_size, Q = cfg.qkv_size(), D = cfg.head_dim(),
                    F = cfg.intermediate_size, A = cfg.num_heads * D;
  w.resize(M, cfg);
  const T eps = static_cast<T>(cfg.rms_norm_eps);
  const TensorView<T, 2> h1(w.h1.data(), {M, H}), qkv(w.qkv.data(), {M, Q}), attn(w.attn.data(), {M, A}),
      x2(w.x2.data(), {M, H}), h2(w.h2.data(), {M, H});
  typename RMSNorm<T>::Cache norm{{}, {w.inv_rms.data(), {M}}};
  RMSNorm<T>::forward({p.input_norm}, eps, x, h1, norm);
  cached_linear<T>(qkv, h1, p.qkv.weight, p.qkv.bias);
  const auto rope_ = block.rope();
  rope_.rotate(qkv.data, Q, 0, cfg.num_heads, rope);
  rope_.rotate(qkv.data, Q, cfg.num_heads * D, cfg.num_kv_heads, rope);
  const CachedAttention<T> attention{cfg.num_heads, cfg.num_kv_heads, D};
  attention.append(layer, qkv.data, batch, seq, kv);
  attention.forward(layer, qkv.data, batch, seq, kv, attn.data, w.attention);
  cached_linear<T>(x2, attn, p.o_proj.weight, p.o_proj.bias);
  autodiff::eval_add(x2, autodiff::constant(x));  // x2 = x + o
  RMSNorm<T>::forward({p.post_norm}, eps, x2, h2, norm);
  const TensorView<T, 2> g(w.g.data(), {M, F}), u(w.u.data(), {M, F}), a(w.a.data(), {M, F});
  cached_linear<T>(g, h2, p.mlp.gate);  // SwiGLU::forward's steps, with cached_linear
  cached_linear<T>(u, h2, p.mlp.up);
  autodiff::eval(a, autodiff::silu(autodiff::constant(TensorView<const T, 2>(g))) *
                        autodiff::constant(TensorView<const T, 2>(u)));
  cached_linear<T>(y, a, p.mlp.down);
  autodiff::eval_add(y, autodiff::constant(TensorView<const T, 2>(x2)));  // y = x2 + mlp
}

}  // namespace causalqwen::nn
