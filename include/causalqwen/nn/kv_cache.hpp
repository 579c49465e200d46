/// The key/value cache of incremental (inference-only) decoding: for every layer, the rotated
/// keys and the values of every token seen so far, plus which of those slots are tokens.
///
///   keys, values of layer l : [B, nkv, capacity, D]   (slot t of row b = the t-th token fed)
///   mask                    : [B, capacity]           (1 = a token, 0 = padding)
///   positions               : [B]                     real tokens seen so far per row
///
/// All rows share the slot index (a batch advances in lockstep); padding, left or right, is a
/// slot whose mask is 0, so no query ever attends to it. Capacity grows geometrically when a
/// step would not fit (the filled slots are copied), so `reserve` is an optimisation only.
#pragma once
#include "causalqwen/core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace causalqwen::nn {

template <class T>
struct KvCache {
  std::size_t batch = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0;
  std::size_t length = 0;    // slots filled (the same for every row)
  std::size_t capacity = 0;  // slots allocated
  std::vector<std::vector<T>> keys, values;  // per layer [B, nkv, capacity, D]
  std::vector<std::int64_t> mask;            // [B, capacity]
  std::vector<std::int64_t> positions;       // [B] rotary position of the next real token

  /// Empties the cache for a new batch of `batch_size` rows (keeps the allocation when the
  /// shape allows) and reserves `slots` slots.
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
      keys.assign(layers, {});
      values.assign(layers, {});
      mask.clear();
    }
    reserve(slots);
  }

  /// Makes room for `slots` slots in total (filled slots are kept).
  void reserve(std::size_t slots) {
    if (slots <= capacity) return;
    const std::size_t old = capacity;
    for (std::size_t l = 0; l < num_layers; ++l) {
      regrow(keys[l], old, slots);
      regrow(values[l], old, slots);
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

  /// Start of the keys (or values) of layer l, row b, KV head g: a [capacity, D] block.
  T* key_block(std::size_t l, std::size_t b, std::size_t g) {
    return keys[l].data() + ((b * num_kv_heads + g) * capacity) * head_dim;
  }
  T* value_block(std::size_t l, std::size_t b, std::size_t g) {
    return values[l].data() + ((b * num_kv_heads + g) * capacity) * head_dim;
  }
  /// Bytes held by the cache.
  std::size_t bytes() const {
    return 2 * num_layers * batch * num_kv_heads * capacity * head_dim * sizeof(T) +
           mask.size() * sizeof(std::int64_t);
  }

 private:
  void regrow(std::vector<T>& buf, std::size_t old, std::size_t slots) {
    std::vector<T> grown(batch * num_kv_heads * slots * head_dim, T(0));
    for (std::size_t bg = 0; bg < batch * num_kv_heads; ++bg)
      std::copy_n(buf.data() + bg * old * head_dim, length * head_dim, grown.data() + bg * slots * head_dim);
    buf.swap(grown);
  }
};

}  // namespace causalqwen::nn
