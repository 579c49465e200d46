/// Rotary position embedding, NEOX / rotate-half convention (Hugging Face Qwen2):
///   inv_freq_j = θ^(−2j/D),  a_j = pos·inv_freq_j  (j < D/2)
///   y_j       = x_j·cos a_j − x_{j+D/2}·sin a_j
///   y_{j+D/2} = x_{j+D/2}·cos a_j + x_j·sin a_j
/// i.e. y = x·cos + rotate_half(x)·sin with rotate_half(x) = [−x₂, x₁] — the two halves of a
/// head are paired, NOT adjacent elements (the interleaved GPT-J convention pairs 2j, 2j+1).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace causalqwen::nn {

template <class T>
struct RotaryEmbedding {
  std::size_t head_dim = 0;
  double theta = 1e6;

  /// cos/sin tables for every row (token) of a batch: [M, D/2] each, and what they were built
  /// for (a training loop's batches mostly repeat their positions: the table is then kept).
  struct Table {
    std::vector<T> cos, sin;
    std::size_t rows = 0;
    std::vector<std::int64_t> positions;
    std::vector<double> inv_freq;  // [D/2] θ^(−2j/D) of the head_dim and θ below
    std::size_t head_dim = 0;
    double theta = 0;
  };

  /// Fills `table` from position_ids [M] (angles computed in double, then rounded to T); leaves
  /// it as it is when it already holds these positions for this head_dim and θ.
  void build(TensorView<const std::int64_t, 1> position_ids, Table& table) const {
    const std::size_t half = head_dim / 2, rows = position_ids.size();
    detail::require(head_dim % 2 == 0 && head_dim > 0, "RotaryEmbedding",
                    "head_dim {} must be even and > 0", head_dim);
    if (table.head_dim == head_dim && table.theta == theta && table.positions.size() == rows &&
        std::equal(position_ids.begin(), position_ids.end(), table.positions.begin()))
      return;
    for (std::size_t m = 0; m < rows; ++m)
      detail::require(position_ids[m] >= 0, "RotaryEmbedding", "position id {} at row {} is < 0",
                      position_ids[m], m);
    table.rows = rows;
    table.cos.resize(rows * half);
    table.sin.resize(rows * half);
    table.positions.assign(position_ids.begin(), position_ids.end());
    if (table.head_dim != head_dim || table.theta != theta) {
      table.inv_freq.resize(half);
      for (std::size_t j = 0; j < half; ++j) table.inv_freq[j] = std::pow(theta, -double(2 * j) / double(head_dim));
      table.head_dim = head_dim;
      table.theta = theta;
    }
    const double* inv_freq = table.inv_freq.data();
    parallel_for(rows, rows * half * 16, [&](std::size_t m) {  // a sine and a cosine cost ~16 elements' work
      for (std::size_t j = 0; j < half; ++j) {
        const double angle = double(position_ids[m]) * inv_freq[j];
        table.cos[m * half + j] = static_cast<T>(std::cos(angle));
        table.sin[m * half + j] = static_cast<T>(std::sin(angle));
      }
    });
  }

  /// Rotates, in place, `heads` heads of head_dim values in every row of `x`, a [M, row_stride]
  /// buffer whose heads start at column `col0` (e.g. the q or k part of a fused q|k|v buffer).
  /// direction = +1 applies the rotation, −1 its inverse = transpose (the backward pass).
  void rotate(T* x, std::size_t row_stride, std::size_t col0, std::size_t heads,
              const Table& table, int direction = +1) const {
    const std::size_t half = head_dim / 2;
    const T sgn = direction > 0 ? T(1) : T(-1);
    parallel_for(table.rows, table.rows * heads * head_dim, [&](std::size_t m) {
      const T* c = table.cos.data() + m * half;
      const T* s = table.sin.data() + m * half;
      for (std::size_t h = 0; h < heads; ++h) {
        T* v = x + m * row_stride + col0 + h * head_dim;
        for (std::size_t j = 0; j < half; ++j) {
          const T a = v[j], b = v[j + half], sj = sgn * s[j];
          v[j] = a * c[j] - b * sj;
          v[j + half] = b * c[j] + a * sj;
        }
      }
    });
  }
};

}  // namespace causalqwen::nn
