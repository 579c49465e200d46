/// Moving tokens between the slots of KV caches (nn::KvCache), for a batch whose rows start and
/// end at different times. A slot of row b holds, in every layer l and KV head g, the rotated
/// key and the value of one token (rotated at the token's own position, so a token's slot may
/// change without changing what it says); its mask entry says whether it is a token.
///   copy_slot:   slot t of row b in `src` → slot t' of row b' in `dst` (same storage, layers, heads)
///   clear_slot:  zero keys and values, mask 0
///   shift_rows:  every row's slots [from, from + n) → [to, to + n), in the same cache
/// Both storages: float blocks [capacity, D], or bf16 panels (Kᵀ [D, capacity], V [capacity, D']).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/nn/kv_cache.hpp"

#include <algorithm>
#include <cstdint>

namespace causalqwen::serve {

/// Slot `t` of row `b` in `src` copied to slot `t_dst` of row `b_dst` in `dst` (keys, values, mask).
template <class T>
void copy_slot(nn::KvCache<T>& src, std::size_t b, std::size_t t, nn::KvCache<T>& dst, std::size_t b_dst, std::size_t t_dst) {
  const std::size_t D = src.head_dim;
  for (std::size_t l = 0; l < src.num_layers; ++l)
    for (std::size_t g = 0; g < src.num_kv_heads; ++g) {
      if (src.storage == nn::KvStorage::f32) {
        std::copy_n(src.key_block(l, b, g) + t * D, D, dst.key_block(l, b_dst, g) + t_dst * D);
        std::copy_n(src.value_block(l, b, g) + t * D, D, dst.value_block(l, b_dst, g) + t_dst * D);
      } else {
        const std::uint16_t* kt = src.key_panel_block(l, b, g);
        const std::uint16_t* v = src.value_panel_block(l, b, g);
        std::uint16_t* kt_dst = dst.key_panel_block(l, b_dst, g);
        std::uint16_t* v_dst = dst.value_panel_block(l, b_dst, g);
        const std::size_t vc = src.value_panel_cols();
        for (std::size_t d = 0; d < D; ++d) {
          kt_dst[linalg::panel_index(d, t_dst, dst.capacity)] = kt[linalg::panel_index(d, t, src.capacity)];
          v_dst[linalg::panel_index(t_dst, d, vc)] = v[linalg::panel_index(t, d, vc)];
        }
      }
    }
  dst.mask[b_dst * dst.capacity + t_dst] = src.mask[b * src.capacity + t];
}

/// Slot `t` of row `b` emptied: keys and values 0 (so a masked slot never holds a stale
/// non-finite value that 0·v would turn into NaN), mask 0.
template <class T>
void clear_slot(nn::KvCache<T>& kv, std::size_t b, std::size_t t) {
  const std::size_t D = kv.head_dim;
  for (std::size_t l = 0; l < kv.num_layers; ++l)
    for (std::size_t g = 0; g < kv.num_kv_heads; ++g) {
      if (kv.storage == nn::KvStorage::f32) {
        std::fill_n(kv.key_block(l, b, g) + t * D, D, T(0));
        std::fill_n(kv.value_block(l, b, g) + t * D, D, T(0));
      } else {
        std::uint16_t* kt = kv.key_panel_block(l, b, g);
        std::uint16_t* v = kv.value_panel_block(l, b, g);
        for (std::size_t d = 0; d < D; ++d) {
          kt[linalg::panel_index(d, t, kv.capacity)] = 0;
          v[linalg::panel_index(t, d, kv.value_panel_cols())] = 0;
        }
      }
    }
  kv.mask[b * kv.capacity + t] = 0;
}

/// Every row's slots [from, from + n) moved to [to, to + n) (overlapping ranges allowed); the
/// slots left behind are cleared. The caller keeps length ≤ capacity.
template <class T>
void shift_rows(nn::KvCache<T>& kv, std::size_t from, std::size_t to, std::size_t n) {
  detail::require(std::max(from, to) + n <= kv.capacity, "serve::shift_rows", "slots [{}, {}) pass the capacity {}",
                  std::max(from, to), std::max(from, to) + n, kv.capacity);
  if (from == to || n == 0) return;
  for (std::size_t b = 0; b < kv.batch; ++b) {
    if (to < from)
      for (std::size_t i = 0; i < n; ++i) copy_slot(kv, b, from + i, kv, b, to + i);
    else
      for (std::size_t i = n; i-- > 0;) copy_slot(kv, b, from + i, kv, b, to + i);
    // the source slots not overwritten by the destination range
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t t = from + i;
      if (t < to || t >= to + n) clear_slot(kv, b, t);
    }
  }
}

}  // namespace causalqwen::serve
