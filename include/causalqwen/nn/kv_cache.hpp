/// The key/value cache of incremental (inference-only) decoding: for every layer, the rotated
/// keys and the values of every token seen so far, plus which of those slots are tokens.
///
///   keys, values of layer l : [B, nkv, capacity, D]   (slot t of row b = the t-th token fed)
///   mask                    : [B, capacity]           (1 = a token, 0 = padding)
///   positions               : [B]                     real tokens seen so far per row
///
/// All rows share the slot index (a batch advances in lockstep); padding, left or right, is a
/// slot whose mask is 0, so no query ever attends to it. Capacity grows geometrically when a
/// step would not fit (the filled slots are copied), so `reserve` is an optimisation only; it is
/// kept a multiple of 16.
///
/// Storage (`KvStorage`): float, or, for a float model whose attention runs its products in bf16
/// (beside bf16 or int8 weights), bf16 in the panels those products read (linalg/packed_weight.hpp:
/// groups of 4 rows, chunks of 16 columns), half the bytes per token to hold and to read at
/// every step when D is a multiple of 16 (the rows are padded with zeros to 4 and 16 values):
///   key_panels   of (l, b, g): Kᵀ [D, capacity]   (row d, column t = k_t,d rounded to bf16)
///   value_panels of (l, b, g): V  [capacity, D']  (D' = D rounded up to 16)
/// Each value is rounded once (nearest even) when its token is appended, as the bf16 products
/// would round it, so the attention's results do not depend on the storage being bf16.
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace causalqwen::nn {

/// How a KvCache holds keys and values: float, or bf16 in the bf16 products' panels.
enum class KvStorage { f32, bf16 };

/// Rounds the keys and values of n tokens (token t's D values at K + t·ld and V + t·ld) to bf16
/// into the panels of slots t0 … t0+n−1: Kᵀ (rows of kt_cols values) and V (rows of v_cols).
inline void store_bf16_keys_values(const float* K, const float* V, std::size_t ld, std::size_t D, std::size_t t0,
                                   std::size_t n, std::uint16_t* kt, std::size_t kt_cols, std::uint16_t* v, std::size_t v_cols) {
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t d = 0; d < D; ++d) {
      kt[linalg::panel_index(d, t0 + t, kt_cols)] = float_to_bf16(K[t * ld + d]);
      v[linalg::panel_index(t0 + t, d, v_cols)] = float_to_bf16(V[t * ld + d]);
    }
}

template <class T>
struct KvCache {
  std::size_t batch = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0;
  std::size_t length = 0;    // slots filled (the same for every row)
  std::size_t capacity = 0;  // slots allocated (a multiple of 16)
  KvStorage storage = KvStorage::f32;
  std::vector<std::vector<T>> keys, values;                           // f32: per layer [B, nkv, capacity, D]
  std::vector<std::vector<std::uint16_t>> key_panels, value_panels;  // bf16: per layer, (b, g) blocks (file comment)
  std::vector<std::int64_t> mask;                                     // [B, capacity]
  std::vector<std::int64_t> positions;                                // [B] rotary position of the next real token

  /// Empties the cache for a new batch of `batch_size` rows (keeps the allocation and the storage
  /// when the shape allows) and reserves `slots` slots.
  void reset(std::size_t batch_size, std::size_t layers, std::size_t kv_heads, std::size_t dim,
             std::size_t slots = 0) {
    const bool same = batch == batch_size && num_layers == layers && num_kv_heads == kv_heads && head_dim == dim;
    batch = batch_size;
    num_layers = layers;
    num_kv_heads = kv_heads;
    head_dim = dim;
    length = 0;
    positions.assign(batch, 0);
    if (!same) {
      capacity = 0;
      keys.assign(storage == KvStorage::f32 ? layers : 0, {});
      values.assign(storage == KvStorage::f32 ? layers : 0, {});
      key_panels.assign(storage == KvStorage::bf16 ? layers : 0, {});
      value_panels.assign(storage == KvStorage::bf16 ? layers : 0, {});
      mask.clear();
    }
    reserve(slots);
  }

  /// Holds keys and values as `s` from now on, converting the filled slots (float to bf16 rounds
  /// each value to nearest even; bf16 to float is exact). Nothing happens when the storage is `s`
  /// already. bf16 storage is for float caches only.
  void use_storage(KvStorage s) {
    if (s == storage) return;
    detail::require(std::is_same_v<T, float> || s == KvStorage::f32, "KvCache::use_storage",
                    "bf16 storage holds the keys of a float model only");
    std::vector<std::vector<T>> k(s == KvStorage::f32 ? num_layers : 0), v(s == KvStorage::f32 ? num_layers : 0);
    std::vector<std::vector<std::uint16_t>> kp(s == KvStorage::bf16 ? num_layers : 0), vp(s == KvStorage::bf16 ? num_layers : 0);
    const std::size_t blocks = batch * num_kv_heads, D = head_dim;
    for (std::size_t l = 0; l < num_layers; ++l) {
      if (s == KvStorage::bf16) {
        kp[l].assign(blocks * key_panel_size(capacity), 0);
        vp[l].assign(blocks * value_panel_size(capacity), 0);
      } else {
        k[l].assign(blocks * capacity * D, T(0));
        v[l].assign(blocks * capacity * D, T(0));
      }
      for (std::size_t bg = 0; bg < blocks; ++bg)
        for (std::size_t t = 0; t < length; ++t)
          for (std::size_t d = 0; d < D; ++d) {
            const std::size_t at = (bg * capacity + t) * D + d;
            const std::size_t kt = bg * key_panel_size(capacity) + key_index(t, d, capacity);
            const std::size_t vt = bg * value_panel_size(capacity) + value_index(t, d);
            if (s == KvStorage::bf16) {
              kp[l][kt] = float_to_bf16(float(keys[l][at]));
              vp[l][vt] = float_to_bf16(float(values[l][at]));
            } else {
              k[l][at] = T(bf16_to_float(key_panels[l][kt]));
              v[l][at] = T(bf16_to_float(value_panels[l][vt]));
            }
          }
    }
    keys.swap(k), values.swap(v), key_panels.swap(kp), value_panels.swap(vp);
    storage = s;
  }

  /// Makes room for `slots` slots in total (filled slots are kept).
  void reserve(std::size_t slots) {
    slots = linalg::panel_padded_cols(slots);
    if (slots <= capacity) return;
    {  // keys and values of every layer, batch row and KV head, plus the mask, checked before growing
      const auto what = fmt::format("the KV cache of {} rows x {} slots ({} layers, {} KV heads of {})", batch, slots,
                                    num_layers, num_kv_heads, head_dim);
      const std::size_t per_layer = checked_product({2, batch, num_kv_heads, slots, head_dim}, what);
      const std::size_t elements = checked_mul(per_layer, num_layers, what);
      const std::size_t bytes = checked_add(checked_mul(elements, storage == KvStorage::f32 ? sizeof(T) : 2, what),
                                            checked_product({batch, slots, sizeof(std::int64_t)}, what), what);
      require_memory(bytes, what);
    }
    const std::size_t old = capacity;
    for (std::size_t l = 0; l < num_layers; ++l) {
      if (storage == KvStorage::f32) {
        regrow(keys[l], old, slots);
        regrow(values[l], old, slots);
      } else {
        regrow_panels(key_panels[l], value_panels[l], old, slots);
      }
    }
    std::vector<std::int64_t> m(batch * slots, 0);
    for (std::size_t b = 0; b < batch; ++b)
      std::copy_n(mask.data() + b * old, length, m.data() + b * slots);
    mask.swap(m);
    capacity = slots;
  }

  /// Ensures `extra` more slots fit, growing capacity by at least half.
  void make_room(std::size_t extra) {
    if (length + extra > capacity) reserve(std::max(length + extra, capacity + capacity / 2 + 16));
  }

  /// Start of the keys (or values) of layer l, row b, KV head g: a [capacity, D] block (f32 storage).
  T* key_block(std::size_t l, std::size_t b, std::size_t g) {
    return keys[l].data() + ((b * num_kv_heads + g) * capacity) * head_dim;
  }
  T* value_block(std::size_t l, std::size_t b, std::size_t g) {
    return values[l].data() + ((b * num_kv_heads + g) * capacity) * head_dim;
  }
  /// The bf16 panels of Kᵀ [D, capacity] (rows of `capacity` values) and of V [capacity, D'] (rows
  /// of value_panel_cols() values) of layer l, row b, KV head g (bf16 storage).
  std::uint16_t* key_panel_block(std::size_t l, std::size_t b, std::size_t g) {
    return key_panels[l].data() + (b * num_kv_heads + g) * key_panel_size(capacity);
  }
  std::uint16_t* value_panel_block(std::size_t l, std::size_t b, std::size_t g) {
    return value_panels[l].data() + (b * num_kv_heads + g) * value_panel_size(capacity);
  }
  /// D rounded up to 16: the length of a row of the value panels.
  std::size_t value_panel_cols() const { return linalg::panel_padded_cols(head_dim); }

  /// Bytes held by the cache.
  std::size_t bytes() const {
    const std::size_t per_block = storage == KvStorage::f32 ? 2 * capacity * head_dim * sizeof(T)
                                                            : (key_panel_size(capacity) + value_panel_size(capacity)) * 2;
    return num_layers * batch * num_kv_heads * per_block + mask.size() * sizeof(std::int64_t);
  }

 private:
  /// Values in one (b, g) block of the key panels, Kᵀ [D rounded up to 4, cap].
  std::size_t key_panel_size(std::size_t cap) const { return linalg::panel_store_size(head_dim, cap); }
  /// Values in one (b, g) block of the value panels, V [cap, D'].
  std::size_t value_panel_size(std::size_t cap) const { return linalg::panel_store_size(cap, value_panel_cols()); }
  /// Where k_t,d and v_t,d lie in their blocks.
  static std::size_t key_index(std::size_t t, std::size_t d, std::size_t cap) { return linalg::panel_index(d, t, cap); }
  std::size_t value_index(std::size_t t, std::size_t d) const { return linalg::panel_index(t, d, value_panel_cols()); }

  void regrow(std::vector<T>& buf, std::size_t old, std::size_t slots) {
    std::vector<T> grown(batch * num_kv_heads * slots * head_dim, T(0));
    for (std::size_t bg = 0; bg < batch * num_kv_heads; ++bg)
      std::copy_n(buf.data() + bg * old * head_dim, length * head_dim, grown.data() + bg * slots * head_dim);
    buf.swap(grown);
  }
  /// The value panels' filled rows keep their places within a block (rows of D' values); the key
  /// panels' rows lengthen, so each key moves.
  void regrow_panels(std::vector<std::uint16_t>& kp, std::vector<std::uint16_t>& vp, std::size_t old, std::size_t slots) {
    const std::size_t blocks = batch * num_kv_heads;
    std::vector<std::uint16_t> k(blocks * key_panel_size(slots), 0), v(blocks * value_panel_size(slots), 0);
    for (std::size_t bg = 0; bg < blocks; ++bg) {
      for (std::size_t d = 0; d < head_dim; ++d)
        for (std::size_t t = 0; t < length; ++t)
          k[bg * key_panel_size(slots) + key_index(t, d, slots)] = kp[bg * key_panel_size(old) + key_index(t, d, old)];
      std::copy_n(vp.data() + bg * value_panel_size(old), value_panel_size(old), v.data() + bg * value_panel_size(slots));
    }
    kp.swap(k);
    vp.swap(v);
  }
};

}  // namespace causalqwen::nn
