/// Attention of new tokens over a KV cache (inference only, no backward):
/// the S new tokens of a step occupy slots L … L+S−1 (L = the cache's length before the step);
/// query slot L+i attends to the keys j ≤ L+i whose mask is 1:
///   s_ij = q_i·k_j / √D,  P_i = softmax_j(s_ij),  o_i = Σ_j P_ij·v_j
/// exactly the masks of CausalSelfAttention (a query without a visible key outputs 0), so a
/// prefill followed by decode steps gives, position by position, the full forward's outputs.
/// As in the full pass, the G query heads of a KV head are gathered into one [S·G, D] matrix and
/// meet the cached keys in block-triangular GEMMs (64 query tokens per block).
#pragma once
#include "causalqwen/core/eigen_map.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/nn/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace causalqwen::nn {

template <class T>
struct CachedAttention {
  std::size_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  static constexpr std::ptrdiff_t block = 64;

  struct Workspace {
    std::vector<T> q, o, scores;  // [S·G, D] ×2, [S·G, L+S]
  };

  std::size_t group() const { return num_heads / num_kv_heads; }

  /// Appends the new keys and values of layer `layer` (the k and v parts of qkv [B·S, (nh+2nkv)·D],
  /// already rotated) at slots L … L+S−1 of `kv` (the caller has made room; kv.length is L).
  void append(std::size_t layer, const T* qkv, std::size_t batch, std::size_t seq, KvCache<T>& kv) const {
    const std::size_t D = head_dim, stride = (num_heads + 2 * num_kv_heads) * D, L = kv.length;
    const std::size_t k0 = num_heads * D, v0 = k0 + num_kv_heads * D;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t g = 0; g < num_kv_heads; ++g) {
        T* K = kv.key_block(layer, b, g) + L * D;
        T* V = kv.value_block(layer, b, g) + L * D;
        for (std::size_t s = 0; s < seq; ++s) {
          const T* row = qkv + (b * seq + s) * stride;
          std::copy_n(row + k0 + g * D, D, K + s * D);
          std::copy_n(row + v0 + g * D, D, V + s * D);
        }
      }
  }

  /// out [B·S, nh·D] from the rotated queries in qkv [B·S, (nh+2nkv)·D] and the cache of layer
  /// `layer`, whose slots 0 … L+S−1 (L = kv.length) are filled and masked in kv.mask.
  void forward(std::size_t layer, const T* qkv, std::size_t batch, std::size_t seq, KvCache<T>& kv,
               T* out, Workspace& w) const {
    const auto S = static_cast<std::ptrdiff_t>(seq), D = static_cast<std::ptrdiff_t>(head_dim),
               G = static_cast<std::ptrdiff_t>(group());
    const auto L = static_cast<std::ptrdiff_t>(kv.length), total = L + S;
    const auto stride = static_cast<std::ptrdiff_t>((num_heads + 2 * num_kv_heads) * head_dim);
    const auto ostride = static_cast<std::ptrdiff_t>(num_heads * head_dim);
    const T scale = T(1) / std::sqrt(T(head_dim));
    w.q.resize(seq * group() * head_dim);
    w.o.resize(seq * group() * head_dim);
    w.scores.resize(seq * group() * static_cast<std::size_t>(total));
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t g = 0; g < num_kv_heads; ++g) {
        const T* base = qkv + b * seq * static_cast<std::size_t>(stride);
        mat(w.q.data(), S, G * D) = strided_mat(base + g * group() * head_dim, S, G * D, stride);
        auto Qg = mat(static_cast<const T*>(w.q.data()), S * G, D);
        auto K = mat(static_cast<const T*>(kv.key_block(layer, b, g)), total, D);
        auto V = mat(static_cast<const T*>(kv.value_block(layer, b, g)), total, D);
        auto Pm = mat(w.scores.data(), S * G, total);
        auto Og = mat(w.o.data(), S * G, D);
        for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
          const std::ptrdiff_t rows = std::min(block, S - i0), cols = L + i0 + rows;
          Pm.block(G * i0, 0, G * rows, cols).noalias() =
              (Qg.middleRows(G * i0, G * rows) * K.topRows(cols).transpose()) * scale;
        }
        softmax_rows(w.scores.data(), seq, static_cast<std::size_t>(L), kv.mask.data() + b * kv.capacity);
        for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
          const std::ptrdiff_t rows = std::min(block, S - i0), cols = L + i0 + rows;
          Og.middleRows(G * i0, G * rows).noalias() = Pm.block(G * i0, 0, G * rows, cols) * V.topRows(cols);
        }
        strided_mat(out + b * seq * static_cast<std::size_t>(ostride) + g * group() * head_dim, S, G * D, ostride) =
            mat(static_cast<const T*>(w.o.data()), S, G * D);
      }
  }

 private:
  /// Row r of P [S·G, L+S] (query slot L + r/G): softmax over the visible keys j ≤ L + r/G.
  /// The same loop as CausalSelfAttention's softmax, so equal scores give equal weights.
  void softmax_rows(T* P, std::size_t seq, std::size_t L, const std::int64_t* keep) const {
    const std::size_t rows_total = seq * group(), total = L + seq;
    parallel_for(rows_total, rows_total * total, [&](std::size_t r) {
      const std::size_t i = L + r / group();
      T* row = P + r * total;
      T mx = -std::numeric_limits<T>::infinity();
      for (std::size_t j = 0; j <= i; ++j)
        if (keep[j]) mx = std::max(mx, row[j]);
      T sum = 0;
      for (std::size_t j = 0; j <= i; ++j) {
        const T e = keep[j] ? std::exp(row[j] - mx) : T(0);
        row[j] = e;
        sum += e;
      }
      const T inv = sum > T(0) ? T(1) / sum : T(0);
      for (std::size_t j = 0; j <= i; ++j) row[j] *= inv;
      std::fill(row + i + 1, row + total, T(0));
    });
  }
};

}  // namespace causalqwen::nn
