/// Causal grouped-query attention over a fused q|k|v buffer (RoPE already applied):
///   s_ij = q_i·k_j / √D  for keys j ≤ i with attention_mask[b,j] = 1, else −∞
///   P_i  = softmax_j(s_ij),  o_i = Σ_j P_ij·v_j
/// Query head h reads KV head h / (num_heads / num_kv_heads) (grouped: consecutive query heads
/// share a KV head, as Hugging Face's repeat_kv). A query with no visible key (a left-padded
/// position) outputs 0. Work is split over (batch × query heads) with OpenMP; the per-head
/// products are Eigen GEMMs on strided maps, computed block-triangularly (only j ≤ i).
#pragma once
#include "causalqwen/core/eigen_map.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace causalqwen::nn {

template <class T>
struct CausalSelfAttention {
  std::size_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  static constexpr std::ptrdiff_t block = 64;  // query rows per triangular block

  std::size_t q_width() const { return num_heads * head_dim; }
  std::size_t kv_width() const { return num_kv_heads * head_dim; }
  std::size_t qkv_width() const { return q_width() + 2 * kv_width(); }
  /// KV head read by query head h.
  std::size_t kv_head(std::size_t h) const { return h / (num_heads / num_kv_heads); }

  struct Cache {
    TensorView<const T, 3> qkv;                   // [B,S,(nh+2nkv)·D] rotated q|k|v
    TensorView<T, 4> probs;                       // [B,nh,S,S] P (storage given by the caller)
    TensorView<const std::int64_t, 2> mask;       // [B,S] or empty (all visible)
  };
  /// Scratch for backward, grown once and reused.
  struct Workspace {
    std::vector<T> dkv;    // [B,nh,S,2D] per-query-head dK|dV before the group sum
    std::vector<T> dprob;  // [threads,S,S]
  };

  /// out [B,S,nh·D] from qkv [B,S,(nh+2nkv)·D]; P is written into c.probs.
  void forward(TensorView<const T, 3> qkv, TensorView<const std::int64_t, 2> mask,
               TensorView<T, 3> out, Cache& c) const {
    const std::size_t batch = qkv.shape[0], seq = qkv.shape[1];
    require_shape(qkv, {batch, seq, qkv_width()}, "CausalSelfAttention::forward", "qkv");
    require_shape(out, {batch, seq, q_width()}, "CausalSelfAttention::forward", "output");
    require_shape(c.probs, {batch, num_heads, seq, seq}, "CausalSelfAttention::forward", "probs");
    if (!mask.empty()) require_shape(mask, {batch, seq}, "CausalSelfAttention::forward", "attention_mask");
    c.qkv = qkv;
    c.mask = mask;
    const auto S = static_cast<std::ptrdiff_t>(seq), D = static_cast<std::ptrdiff_t>(head_dim);
    const auto stride = static_cast<std::ptrdiff_t>(qkv_width());
    const auto ostride = static_cast<std::ptrdiff_t>(q_width());
    const T scale = T(1) / std::sqrt(T(head_dim));
    const auto tasks = static_cast<std::int64_t>(batch * num_heads);
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1 && seq * seq * head_dim >= 4096)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::size_t b = static_cast<std::size_t>(t) / num_heads, h = static_cast<std::size_t>(t) % num_heads;
      const T* base = qkv.data + b * seq * qkv_width();
      auto Q = strided_mat(base + h * head_dim, S, D, stride);
      auto K = strided_mat(base + q_width() + kv_head(h) * head_dim, S, D, stride);
      auto V = strided_mat(base + q_width() + kv_width() + kv_head(h) * head_dim, S, D, stride);
      auto O = strided_mat(out.data + b * seq * q_width() + h * head_dim, S, D, ostride);
      T* P = c.probs.data + (b * num_heads + h) * seq * seq;
      auto Pm = mat(P, S, S);
      const std::int64_t* keep = mask.empty() ? nullptr : mask.data + b * seq;
      for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
        const std::ptrdiff_t rows = std::min(block, S - i0), cols = i0 + rows;
        Pm.block(i0, 0, rows, cols).noalias() =
            (Q.middleRows(i0, rows) * K.topRows(cols).transpose()) * scale;
        for (std::ptrdiff_t i = i0; i < i0 + rows; ++i) {
          T* row = P + i * S;
          T mx = -std::numeric_limits<T>::infinity();
          for (std::ptrdiff_t j = 0; j <= i; ++j)
            if (!keep || keep[j]) mx = std::max(mx, row[j]);
          T sum = 0;
          for (std::ptrdiff_t j = 0; j <= i; ++j) {
            const T e = (!keep || keep[j]) ? std::exp(row[j] - mx) : T(0);
            row[j] = e;
            sum += e;
          }
          const T inv = sum > T(0) ? T(1) / sum : T(0);
          for (std::ptrdiff_t j = 0; j <= i; ++j) row[j] *= inv;
          std::fill(row + i + 1, row + S, T(0));
        }
        O.middleRows(i0, rows).noalias() = Pm.block(i0, 0, rows, cols) * V.topRows(cols);
      }
    }
  }

  /// From dout [B,S,nh·D]: dqkv [B,S,(nh+2nkv)·D] += (dq | dk | dv) w.r.t. the rotated q, k, v.
  ///   dP = dO·Vᵀ;  dS = P ⊙ (dP − rowsum(dP ⊙ P));  dQ = dS·K/√D;  dK = dSᵀ·Q/√D;  dV = Pᵀ·dO
  /// dK, dV of the query heads sharing a KV head are summed after the parallel loop.
  void backward(const Cache& c, TensorView<const T, 3> dout, TensorView<T, 3> dqkv,
                Workspace& w) const {
    const std::size_t batch = c.qkv.shape[0], seq = c.qkv.shape[1];
    require_shape(dout, {batch, seq, q_width()}, "CausalSelfAttention::backward", "dout");
    require_shape(dqkv, c.qkv.shape, "CausalSelfAttention::backward", "dqkv");
    const auto S = static_cast<std::ptrdiff_t>(seq), D = static_cast<std::ptrdiff_t>(head_dim);
    const auto stride = static_cast<std::ptrdiff_t>(qkv_width());
    const auto ostride = static_cast<std::ptrdiff_t>(q_width());
    const T scale = T(1) / std::sqrt(T(head_dim));
    const std::size_t per_head = seq * 2 * head_dim;
    w.dkv.assign(batch * num_heads * per_head, T(0));
    const auto threads = static_cast<std::size_t>(omp_get_max_threads());
    if (w.dprob.size() < threads * seq * seq) w.dprob.resize(threads * seq * seq);
    const auto tasks = static_cast<std::int64_t>(batch * num_heads);
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1 && seq * seq * head_dim >= 4096)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::size_t b = static_cast<std::size_t>(t) / num_heads, h = static_cast<std::size_t>(t) % num_heads;
      const T* base = c.qkv.data + b * seq * qkv_width();
      auto Q = strided_mat(base + h * head_dim, S, D, stride);
      auto K = strided_mat(base + q_width() + kv_head(h) * head_dim, S, D, stride);
      auto V = strided_mat(base + q_width() + kv_width() + kv_head(h) * head_dim, S, D, stride);
      auto dO = strided_mat(dout.data + b * seq * q_width() + h * head_dim, S, D, ostride);
      auto dQ = strided_mat(dqkv.data + b * seq * qkv_width() + h * head_dim, S, D, stride);
      T* dkv = w.dkv.data() + static_cast<std::size_t>(t) * per_head;
      auto dK = strided_mat(dkv, S, D, 2 * D);
      auto dV = strided_mat(dkv + head_dim, S, D, 2 * D);
      const T* P = c.probs.data + (b * num_heads + h) * seq * seq;
      auto Pm = mat(P, S, S);
      T* dP = w.dprob.data() + static_cast<std::size_t>(omp_get_thread_num()) * seq * seq;
      auto dPm = mat(dP, S, S);
      for (std::ptrdiff_t i0 = 0; i0 < S; i0 += block) {
        const std::ptrdiff_t rows = std::min(block, S - i0), cols = i0 + rows;
        dPm.block(i0, 0, rows, cols).noalias() = dO.middleRows(i0, rows) * V.topRows(cols).transpose();
        for (std::ptrdiff_t i = i0; i < i0 + rows; ++i) {
          const T* p = P + i * S;
          T* d = dP + i * S;
          T dot = 0;
          for (std::ptrdiff_t j = 0; j <= i; ++j) dot += p[j] * d[j];
          for (std::ptrdiff_t j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - dot) * scale;
          std::fill(d + i + 1, d + i0 + rows, T(0));
        }
        auto dS = dPm.block(i0, 0, rows, cols);
        dQ.middleRows(i0, rows).noalias() += dS * K.topRows(cols);
        dK.topRows(cols).noalias() += dS.transpose() * Q.middleRows(i0, rows);
        dV.topRows(cols).noalias() += Pm.block(i0, 0, rows, cols).transpose() * dO.middleRows(i0, rows);
      }
    }
    // Sum each group's dK|dV into the KV head's columns of dqkv.
    const std::size_t group = num_heads / num_kv_heads;
    parallel_for(batch * seq, batch * seq * num_heads * 2 * head_dim, [&](std::size_t bs) {
      const std::size_t b = bs / seq, s = bs % seq;
      T* row = dqkv.data + bs * qkv_width();
      for (std::size_t h = 0; h < num_heads; ++h) {
        const T* src = w.dkv.data() + (b * num_heads + h) * per_head + s * 2 * head_dim;
        T* dk = row + q_width() + (h / group) * head_dim;
        T* dv = row + q_width() + kv_width() + (h / group) * head_dim;
        for (std::size_t d = 0; d < head_dim; ++d) {
          dk[d] += src[d];
          dv[d] += src[head_dim + d];
        }
      }
    });
  }
};

}  // namespace causalqwen::nn
