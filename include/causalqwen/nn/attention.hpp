/// Causal grouped-query attention over a fused q|k|v buffer (RoPE already applied), for training
/// (keys and values of the same tokens, P kept for backward) and for incremental decoding (keys
/// and values of earlier steps in a KvCache): one `attend` and one softmax serve both.
///   s_ij = q_i·k_j / √D  for keys j ≤ i with attention_mask[b,j] = 1, else −∞
///   P_i  = softmax_j(s_ij),  o_i = Σ_j P_ij·v_j
/// Query head h reads KV head h / G, G = num_heads / num_kv_heads (grouped: consecutive query
/// heads share a KV head, as Hugging Face's repeat_kv). A query with no visible key (a
/// left-padded position) outputs 0.
///
/// The G query heads of a group are processed together: their queries, gathered as a
/// [S·G, D] matrix (row i·G + g' = token i, head g'), meet the group's K and V in a few large
/// GEMMs per (batch, KV head), computed block-triangularly (query rows of 64 tokens against the
/// keys j < block end), so GEMMs run outside any `omp parallel` region and are threaded by
/// linalg::matmul; the softmax rows run in parallel with OpenMP. dK and dV of a group come
/// out of one product each (dK = dSᵀ·Q sums over the group's heads), so there are no races.
/// Beside bf16 or int8 weights (`bf16_products`) the two forward products run on the bf16
/// product instead, q, k, P and v rounded to bf16, the softmax still in float; the keys and
/// values are then read from bf16 panels (a KvCache with bf16 storage, or the workspace).
#pragma once
#include "causalqwen/core/eigen_map.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/simd/exp_float.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/bf16_gemm.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/row_sums.hpp"
#include "causalqwen/nn/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace causalqwen::nn {

namespace detail_attention {

#if defined(__x86_64__) && defined(__GNUC__)
/// x_j ← x_j·scale for j < n, and max_j of the scaled values (NaN passed over, −∞ when n = 0),
/// 16 lanes at a time in one pass: lane l keeps max(v, m) as vmaxps takes it (m when v is a NaN
/// or a zero of either sign equal to m), the bits of the scalar `m < v ? v : m`.
__attribute__((target("avx512f"))) inline float scale_and_max_avx512(float* x, std::size_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (std::size_t j = 0; j < n; j += 16) {
    const __mmask16 live = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1u);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, x + j), s);
    _mm512_mask_storeu_ps(x + j, live, v);
    m = _mm512_mask_max_ps(m, live, v, m);
  }
  return _mm512_reduce_max_ps(m);
}
#endif

}  // namespace detail_attention

template <class T>
struct CausalSelfAttention {
  using Op = linalg::Op;
  std::size_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  static constexpr std::ptrdiff_t block = 64;  // query tokens per triangular block
  /// Whether the forward products (Q·Kᵀ and P·V) run in bf16 with float sums
  /// (linalg::bf16_matmul: q, k, P and v rounded to bf16, every product exact), as the layers of
  /// a model with bf16 or int8 weights do; float models only. The sums' order depends on the
  /// head size and on the keys alone, so a prompt gives the same bits in one prefill as fed a
  /// token at a time. Backward stays float (training never runs with such weights).
  bool bf16_products = false;

  std::size_t group() const { return num_heads / num_kv_heads; }
  std::size_t q_width() const { return num_heads * head_dim; }
  std::size_t kv_width() const { return num_kv_heads * head_dim; }
  std::size_t qkv_width() const { return q_width() + 2 * kv_width(); }
  /// KV head read by query head h.
  std::size_t kv_head(std::size_t h) const { return h / group(); }

  struct Cache {
    TensorView<const T, 3> qkv;              // [B,S,(nh+2nkv)·D] rotated q|k|v
    TensorView<T, 5> probs;                  // [B,nkv,S,G,S] P (storage given by the caller)
    TensorView<const std::int64_t, 2> mask;  // [B,S] or empty (all visible)
    /// P of query head h, query i, key j.
    T prob(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
      const std::size_t G = probs.shape[3];
      return probs(b, h / G, i, h % G, j);
    }
  };
  /// Scratch, grown once and reused.
  struct Workspace {
    std::vector<T> q, o, dq, dp;         // [S·G, D] ×3, [S·G, S] (decoding: one block's scores [G·64, L+S])
    std::vector<std::uint16_t> kt, v;    // bf16_products without a cache: the group's Kᵀ [D, S'] and V [S', D'] in bf16 panels
  };
  /// Whether the forward products run in bf16 (bf16_products, for float models).
  bool products_in_bf16() const { return std::is_same_v<T, float> && bf16_products; }

  /// The shape of Cache::probs for B×S tokens.
  Shape<5> probs_shape(std::size_t batch, std::size_t seq) const {
    return {batch, num_kv_heads, seq, group(), seq};
  }

  /// out [B,S,nh·D] from qkv [B,S,(nh+2nkv)·D]; P is written into c.probs, or, when c.probs is
  /// empty (an evaluation: nothing for backward), one block at a time into the workspace.
  void forward(TensorView<const T, 3> qkv, TensorView<const std::int64_t, 2> mask,
               TensorView<T, 3> out, Cache& c, Workspace& w) const {
    const std::size_t batch = qkv.shape[0], seq = qkv.shape[1];
    require_shape(qkv, {batch, seq, qkv_width()}, "CausalSelfAttention::forward", "qkv");
    require_shape(out, {batch, seq, q_width()}, "CausalSelfAttention::forward", "output");
    const bool keep = !c.probs.empty();
    if (keep) require_shape(c.probs, probs_shape(batch, seq), "CausalSelfAttention::forward", "probs");
    if (!mask.empty()) require_shape(mask, {batch, seq}, "CausalSelfAttention::forward", "attention_mask");
    c.qkv = qkv;
    c.mask = mask;
    const std::size_t block_rows = group() * std::min<std::size_t>(seq, block);
    // bf16 products: the group's keys and values rounded once into panels of the workspace
    const std::size_t kt_cols = linalg::panel_padded_cols(seq), v_cols = linalg::panel_padded_cols(head_dim);
    for_each_group(batch, seq, w, [&](std::size_t b, std::size_t g, Workspace& wt) {
      const T* base = qkv.data + b * seq * qkv_width();
      if (!keep && wt.dp.size() < block_rows * seq) wt.dp.resize(block_rows * seq);
      T* P = keep ? c.probs.data + (b * num_kv_heads + g) * seq * group() * seq : wt.dp.data();
      Keys keys{base + q_width() + g * head_dim, base + q_width() + kv_width() + g * head_dim, qkv_width()};
      if constexpr (std::is_same_v<T, float>) {
        if (products_in_bf16()) {
          if (wt.kt.size() < linalg::panel_store_size(head_dim, kt_cols)) wt.kt.resize(linalg::panel_store_size(head_dim, kt_cols));
          if (wt.v.size() < linalg::panel_store_size(seq, v_cols)) wt.v.resize(linalg::panel_store_size(seq, v_cols));
          store_bf16_keys_values(keys.K, keys.V, keys.ld, head_dim, 0, seq, wt.kt.data(), kt_cols, wt.v.data(), v_cols);
          keys.kt = wt.kt.data(), keys.kt_cols = kt_cols, keys.v = wt.v.data(), keys.v_cols = v_cols;
        }
      }
      attend(base, g, seq, 0, keys, mask.empty() ? nullptr : mask.data + b * seq, P, keep, out.data + b * seq * q_width(), wt);
    });
  }

  /// Decoding against a cache: the S new tokens of each row (qkv [B·S, (nh+2nkv)·D], rotated)
  /// take slots L … L+S−1 of layer `layer` (L = kv.length; the caller has made room and set the
  /// slots' mask); their keys and values are appended, and query slot L+i attends to the keys
  /// j ≤ L+i whose mask is 1. out [B·S, nh·D]. Nothing is kept for backward. The cache stores
  /// bf16 exactly when the products run in bf16 (KvCache::use_storage).
  void forward_cached(std::size_t layer, const T* qkv, std::size_t batch, std::size_t seq, KvCache<T>& kv, T* out,
                      Workspace& w) const {
    const std::size_t D = head_dim, L = kv.length;
    const std::size_t k0 = q_width(), v0 = k0 + kv_width();
    const bool bf16 = products_in_bf16();
    detail::require((kv.storage == KvStorage::bf16) == bf16, "CausalSelfAttention::forward_cached",
                    "the cache stores {} keys and values but the products run in {} (KvCache::use_storage sets the storage)",
                    kv.storage == KvStorage::bf16 ? "bf16" : "float", bf16 ? "bf16" : "float");
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t g = 0; g < num_kv_heads; ++g) {
        const T* rows = qkv + b * seq * qkv_width();
        if constexpr (std::is_same_v<T, float>) {
          if (bf16) {
            store_bf16_keys_values(rows + k0 + g * D, rows + v0 + g * D, qkv_width(), D, L, seq, kv.key_panel_block(layer, b, g),
                                   kv.capacity, kv.value_panel_block(layer, b, g), kv.value_panel_cols());
            continue;
          }
        }
        T* K = kv.key_block(layer, b, g);
        T* V = kv.value_block(layer, b, g);
        for (std::size_t s = 0; s < seq; ++s) {
          std::copy_n(rows + s * qkv_width() + k0 + g * D, D, K + (L + s) * D);
          std::copy_n(rows + s * qkv_width() + v0 + g * D, D, V + (L + s) * D);
        }
      }
    // P of one query block at a time, [block_rows, L + seq]: sized for the cache's capacity, so
    // that the steps after the first do not grow it key by key
    const std::size_t block_rows = group() * std::min<std::size_t>(seq, block);
    for_each_group(batch, seq, w, [&](std::size_t b, std::size_t g, Workspace& wt) {
      if (wt.dp.size() < block_rows * kv.capacity) wt.dp.resize(block_rows * kv.capacity);
      const Keys keys = bf16 ? Keys{nullptr, nullptr, 0, kv.key_panel_block(layer, b, g), kv.capacity,
                                    kv.value_panel_block(layer, b, g), kv.value_panel_cols()}
                             : Keys{kv.key_block(layer, b, g), kv.value_block(layer, b, g), D};
      attend(qkv + b * seq * qkv_width(), g, seq, L, keys, kv.mask.data() + b * kv.capacity, wt.dp.data(), false,
             out + b * seq * q_width(), wt);
    });
  }

  /// From dout [B,S,nh·D]: dqkv [B,S,(nh+2nkv)·D] += (dq | dk | dv) w.r.t. the rotated q, k, v.
  ///   dP = dO·Vᵀ;  dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √D;  dQ = dS·K;  dK = dSᵀ·Q;  dV = Pᵀ·dO
  void backward(const Cache& c, TensorView<const T, 3> dout, TensorView<T, 3> dqkv, Workspace& workspace) const {
    const std::size_t batch = c.qkv.shape[0], seq = c.qkv.shape[1];
    require_shape(dout, {batch, seq, q_width()}, "CausalSelfAttention::backward", "dout");
    require_shape(dqkv, c.qkv.shape, "CausalSelfAttention::backward", "dqkv");
    require_shape(c.probs, probs_shape(batch, seq), "CausalSelfAttention::backward", "probs kept by forward");
    const auto S = static_cast<std::ptrdiff_t>(seq), D = static_cast<std::ptrdiff_t>(head_dim),
               G = static_cast<std::ptrdiff_t>(group());
    const auto stride = static_cast<std::ptrdiff_t>(qkv_width()), ostride = static_cast<std::ptrdiff_t>(q_width());
    const T scale = T(1) / std::sqrt(T(head_dim));
    const std::size_t n = seq * group() * head_dim;
    for_each_group(batch, seq, workspace, [&](std::size_t b, std::size_t g, Workspace& w) {
      w.q.resize(n), w.o.resize(n), w.dq.resize(n);
      w.dp.resize(seq * group() * seq);
      const T* base = c.qkv.data + b * seq * qkv_width();
      T* dbase = dqkv.data + b * seq * qkv_width();
      mat(w.q.data(), S, G * D) = strided_mat(base + g * group() * head_dim, S, G * D, stride);
      mat(w.o.data(), S, G * D) = strided_mat(dout.data + b * seq * q_width() + g * group() * head_dim, S, G * D, ostride);
      // row-major operands: Qg, dOg, dQg [S·G, D] (ld D); K, V, dK, dV [S, D] (ld = qkv width);
      // P, dP [S·G, S] (ld S)
      const T *Qg = w.q.data(), *dOg = w.o.data();
      T* dQg = w.dq.data();
      const T* K = base + q_width() + g * head_dim;
      const T* V = K + kv_width();
      T* dK = dbase + q_width() + g * head_dim;
      T* dV = dK + kv_width();
      const T* P = c.probs.data + (b * num_kv_heads + g) * seq * group() * seq;
      T* dP = w.dp.data();
      const std::size_t ld = qkv_width(), Gs = group(), Ds = head_dim;
      for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
        const std::ptrdiff_t rows = std::min(block, S - i0), cols = i0 + rows;
        const std::size_t r0 = Gs * std::size_t(i0), nr = Gs * std::size_t(rows), nc = std::size_t(cols);
        linalg::matmul<T>(Op::plain, Op::transposed, nr, nc, Ds, dOg + r0 * Ds, Ds, V, ld, dP + r0 * seq, seq, false);
      }
      // dS in place of dP, row by row (row r = token r / G): entries j ≤ i, zero beyond
      const std::size_t rows_total = seq * group();
      parallel_for(rows_total, rows_total * seq / 2, [&](std::size_t r) {
        const std::size_t i = r / group();
        const std::size_t end = std::min<std::size_t>(seq, (i / block + 1) * block);  // its block's columns
        const T* p = P + r * seq;
        T* d = w.dp.data() + r * seq;
        T dot = 0;
        for (std::size_t j = 0; j <= i; ++j) dot += p[j] * d[j];
        for (std::size_t j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - dot) * scale;
        for (std::size_t j = i + 1; j < end; ++j) d[j] = T(0);
      });
      for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {  // dS in dP's place
        const std::ptrdiff_t rows = std::min(block, S - i0), cols = i0 + rows;
        const std::size_t r0 = Gs * std::size_t(i0), nr = Gs * std::size_t(rows), nc = std::size_t(cols);
        linalg::matmul<T>(Op::plain, Op::plain, nr, Ds, nc, dP + r0 * seq, seq, K, ld, dQg + r0 * Ds, Ds, false);
        linalg::matmul<T>(Op::transposed, Op::plain, nc, Ds, nr, dP + r0 * seq, seq, Qg + r0 * Ds, Ds, dK, ld, true);
        linalg::matmul<T>(Op::transposed, Op::plain, nc, Ds, nr, P + r0 * seq, seq, dOg + r0 * Ds, Ds, dV, ld, true);
      }
      strided_mat(dbase + g * group() * head_dim, S, G * D, stride) += mat(static_cast<const T*>(w.dq.data()), S, G * D);
    });
  }

 private:
  /// Multiply-adds of Q·Kᵀ for one (row, KV group) below which the groups run in parallel (each
  /// on one thread, its products serial) instead of one after another with threaded products.
  static constexpr double parallel_group_multiply_adds = 1 << 20;

  /// f(b, g, workspace) for every row b and KV group g: one after another with `w` (each
  /// product then threaded by linalg::matmul), or the groups spread over the OpenMP threads, each
  /// with a workspace of its own (the calling thread's is `w`; the others are per thread, grown
  /// once), when a group's products are too small to thread (a short sequence, a small head) or
  /// when the groups deal evenly over the threads (every thread the same work and no barrier
  /// inside the products: a prompt's two KV groups on two cores). Every group writes its own
  /// slices only, and each product and softmax gives the same bits on one thread as on several,
  /// so the results do not depend on the choice.
  template <class F>
  void for_each_group(std::size_t batch, std::size_t seq, Workspace& w, F&& f) const {
    const std::size_t units = batch * num_kv_heads, threads = std::size_t(std::max(1, omp_get_max_threads()));
    const double work = double(seq) * double(group()) * double(seq) * double(head_dim);
    const bool even = units % threads == 0;
    if ((work >= parallel_group_multiply_adds && !even) || units < 2 || omp_in_parallel() || threads == 1) {
      for (std::size_t u = 0; u < units; ++u) f(u / num_kv_heads, u % num_kv_heads, w);
      return;
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t u = 0; u < std::int64_t(units); ++u) {
      thread_local Workspace own;
      f(std::size_t(u) / num_kv_heads, std::size_t(u) % num_kv_heads, omp_get_thread_num() == 0 ? w : own);
    }
  }

  /// The keys and values a group attends to: float rows K and V [L+S, D] (leading dimension ld),
  /// or, when the products run in bf16, the bf16 panels of Kᵀ [D, ·] (rows of kt_cols values) and
  /// of V [·, D'] (rows of v_cols values).
  struct Keys {
    const T* K = nullptr;
    const T* V = nullptr;
    std::size_t ld = 0;
    const std::uint16_t* kt = nullptr;
    std::size_t kt_cols = 0;
    const std::uint16_t* v = nullptr;
    std::size_t v_cols = 0;
  };

  /// One KV group g of one row: its G query heads, gathered from `base` (the row's q|k|v
  /// [S, (nh+2nkv)·D]) as a [S·G, D] matrix (row i·G + g' = token i, head g'), meet the keys
  /// K [L+S, D] and values V [L+S, D] (`keys`) block by block (64
  /// query tokens per block, each against the keys j < L + block end): the block's scores, their
  /// softmax and its product with V run one after the other, while the block's rows of P are
  /// still in cache (a prompt of 4,096 tokens has a P of 470 MB per group: written whole and read
  /// back, it made attention a walk through memory):
  ///   P [S·G, L+S] = softmax over the visible keys of (Q·Kᵀ/√D);  O = P·V → out (row stride nh·D)
  /// `whole_p`: P is [S·G, L+S] and kept (training's backward reads it); else P holds one block's
  /// rows [G·64, L+S] and is reused by the next block (decoding keeps nothing).
  void attend(const T* base, std::size_t g, std::size_t seq, std::size_t L, const Keys& keys, const std::int64_t* keep, T* P,
              bool whole_p, T* out, Workspace& w) const {
    const auto S = static_cast<std::ptrdiff_t>(seq), D = static_cast<std::ptrdiff_t>(head_dim),
               G = static_cast<std::ptrdiff_t>(group());
    const auto stride = static_cast<std::ptrdiff_t>(qkv_width()), ostride = static_cast<std::ptrdiff_t>(q_width());
    const T scale = T(1) / std::sqrt(T(head_dim));
    const std::size_t total = L + seq, Gs = group(), Ds = head_dim;
    w.q.resize(seq * group() * head_dim);
    w.o.resize(seq * group() * head_dim);
    mat(w.q.data(), S, G * D) = strided_mat(base + g * group() * head_dim, S, G * D, stride);
    // a mask of all ones hides nothing: the softmax then skips reading it for every score
    if (keep && std::all_of(keep, keep + total, [](std::int64_t m) { return m != 0; })) keep = nullptr;
    // bf16 products: both on the bf16 product's outer-product kernel (bf16_matmul of two plain
    // operands), whose outputs are each a sum over D (the scores) or over the keys (P·V) with no
    // lanes to add up at the end; B is the panels of Kᵀ [D, L+S] (each block reads its first nc
    // columns) or of V [L+S, D] (its first nc rows)
    const T *K = keys.K, *V = keys.V;
    const std::size_t kv_ld = keys.ld;
    for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
      const std::size_t r0 = Gs * std::size_t(i0), nr = Gs * std::size_t(std::min(block, S - i0)),
                        nc = L + std::size_t(i0) + nr / Gs;
      T* P_block = whole_p ? P + r0 * total : P;  // [nr, total]
      const T* Q_block = w.q.data() + r0 * Ds;   // [nr, D]
      T* O_block = w.o.data() + r0 * Ds;         // [nr, D]
      if constexpr (std::is_same_v<T, float>) {
        if (products_in_bf16()) {
          const linalg::PackedRef kt{.type = linalg::Format::bf16, .rows = Ds, .cols = nc, .cols_padded = keys.kt_cols, .bf16 = keys.kt};
          const linalg::PackedRef v{.type = linalg::Format::bf16, .rows = nc, .cols = Ds, .cols_padded = keys.v_cols, .bf16 = keys.v};
          linalg::bf16_matmul(Op::plain, Op::plain, nr, nc, Ds, Q_block, Ds, nullptr, 0, P_block, total, false, kt);
          softmax_rows(P_block, total, r0, nr, L, keep, scale, whole_p ? total : nc);
          linalg::bf16_matmul(Op::plain, Op::plain, nr, Ds, nc, P_block, total, nullptr, 0, O_block, Ds, false, v);
          continue;
        }
      }
      linalg::matmul<T>(Op::plain, Op::transposed, nr, nc, Ds, Q_block, Ds, K, kv_ld, P_block, total, false);  // Q·Kᵀ
      softmax_rows(P_block, total, r0, nr, L, keep, scale, whole_p ? total : nc);
      linalg::matmul<T>(Op::plain, Op::plain, nr, Ds, nc, P_block, total, V, kv_ld, O_block, Ds, false);  // P·V
    }
    strided_mat(out + g * group() * head_dim, S, G * D, ostride) = mat(static_cast<const T*>(w.o.data()), S, G * D);
  }

  /// Rows [r0, r0 + nr) of P (query slot i = L + r/G; row r at P_rows + (r − r0)·ld), holding the
  /// scores q_i·k_j: each score j ≤ i is scaled by `scale` (1/√D), then replaced by the softmax
  /// over the keys j ≤ i whose `keep` is 1 (null: all); columns (i, end) are set to 0, and a row
  /// without a visible key is all 0.
  /// P_ij = e^{x_ij − max_j x_ij} / Σ_j e^{x_ij − max_j x_ij}, the sum taken in key order. For
  /// float the maximum runs 16 keys at a time (a maximum does not depend on the order), the
  /// exponentials 16 at a time (`exp_float`: the same bits as `std::exp`), and the sums of 16 rows
  /// side by side, each in key order (`linalg::ordered_row_sums`): the bits of the scalar loop.
  /// A masked key's e^{−∞} = 0 exactly.
  void softmax_rows(T* P_rows, std::size_t ld, std::size_t r0, std::size_t nr, std::size_t L, const std::int64_t* keep,
                    T scale, std::size_t end) const {
    constexpr std::size_t rows_per_task = 16;
    const std::size_t tasks = (nr + rows_per_task - 1) / rows_per_task;
    parallel_for(tasks, nr * (L + (r0 + nr) / group()), [&](std::size_t task) {
      const std::size_t first = task * rows_per_task, last = std::min(nr, first + rows_per_task);
      std::size_t lengths[rows_per_task];  // keys j ≤ i of each row
      T sums[rows_per_task];
      for (std::size_t local = first; local < last; ++local) {
        const std::size_t n = L + (r0 + local) / group() + 1;
        lengths[local - first] = n;
        T* row = P_rows + local * ld;
        const T mx = scale_and_max(row, n, keep, scale);
        if constexpr (std::is_same_v<T, float>) {
          constexpr float masked = -std::numeric_limits<float>::infinity();
          for (std::size_t j = 0; j < n; ++j) row[j] = (!keep || keep[j]) ? row[j] - mx : masked;
          exp_float(row, row, n);
        } else {
          for (std::size_t j = 0; j < n; ++j) row[j] = (!keep || keep[j]) ? std::exp(row[j] - mx) : T(0);
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        linalg::ordered_row_sums(P_rows + first * ld, ld, last - first, lengths, sums);
      } else {
        for (std::size_t local = first; local < last; ++local) {
          T sum = 0;
          for (std::size_t j = 0; j < lengths[local - first]; ++j) sum += P_rows[local * ld + j];
          sums[local - first] = sum;
        }
      }
      for (std::size_t local = first; local < last; ++local) {
        const std::size_t n = lengths[local - first];
        T* row = P_rows + local * ld;
        const T sum = sums[local - first], inv = sum > T(0) ? T(1) / sum : T(0);
        for (std::size_t j = 0; j < n; ++j) row[j] *= inv;
        std::fill(row + n, row + end, T(0));
      }
    });
  }

  /// x_j ← x_j·scale for j < n, then visible_max of the scaled row: one pass on AVX-512 when every
  /// key is visible (a maximum does not depend on the order it is taken in, but for the sign of a
  /// zero maximum, which no x − max then changes).
  static T scale_and_max(T* x, std::size_t n, const std::int64_t* keep, T scale) {
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (std::is_same_v<T, float>)
      if (!keep && linalg::cpu_has_avx512f()) return detail_attention::scale_and_max_avx512(x, n, scale);
#endif
    for (std::size_t j = 0; j < n; ++j) x[j] *= scale;
    return visible_max(x, n, keep);
  }

  /// max_j x_j over the visible keys j < n (keep[j] = 1, or all when keep is null); −∞ when none
  /// is visible; a NaN is passed over (std::max(m, NaN) = m). In 16 lanes: the maximum of a set
  /// does not depend on the order it is taken in, but for the sign of a zero maximum, which no
  /// x − max then changes (x − (±0) = x, and e^{±0} = 1).
  static T visible_max(const T* x, std::size_t n, const std::int64_t* keep) {
    constexpr std::size_t lanes = 16;
    constexpr T none = -std::numeric_limits<T>::infinity();
    T lane_max[lanes];
    std::fill_n(lane_max, lanes, none);
    std::size_t j = 0;
    if (!keep) {
      for (; j + lanes <= n; j += lanes)
        for (std::size_t l = 0; l < lanes; ++l) lane_max[l] = lane_max[l] < x[j + l] ? x[j + l] : lane_max[l];
    } else {
      for (; j + lanes <= n; j += lanes)
        for (std::size_t l = 0; l < lanes; ++l) {
          const T v = keep[j + l] ? x[j + l] : none;
          lane_max[l] = lane_max[l] < v ? v : lane_max[l];
        }
    }
    T mx = none;
    for (std::size_t l = 0; l < lanes; ++l) mx = std::max(mx, lane_max[l]);
    for (; j < n; ++j)
      if (!keep || keep[j]) mx = std::max(mx, x[j]);
    return mx;
  }
};

}  // namespace causalqwen::nn
