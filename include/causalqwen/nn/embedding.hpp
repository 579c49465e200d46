/// Embedding: y[m,:] = E[id_m,:]; backward scatters dy rows into the rows of dE that were used.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"

#include <algorithm>
#include <cstdint>

namespace causalqwen::nn {

template <class T>
struct Embedding {
  struct Params {
    TensorView<T, 2> weight;  // [V,H]
  };

  /// y[m,:] = E[ids[m],:] :  ids [M] → y [M,H]; every id must be in [0, V).
  static void forward(const Params& p, TensorView<const std::int64_t, 1> ids, TensorView<T, 2> y) {
    const std::size_t vocab = p.weight.shape[0], hidden = p.weight.shape[1];
    require_shape(y, {ids.size(), hidden}, "Embedding::forward", "output");
    for (std::size_t m = 0; m < ids.size(); ++m)
      detail::require(ids[m] >= 0 && static_cast<std::size_t>(ids[m]) < vocab,
                      "Embedding::forward", "token id {} at position {} is outside [0, {})",
                      ids[m], m, vocab);
    parallel_for(ids.size(), ids.size() * hidden, [&](std::size_t m) {
      const T* row = p.weight.data + static_cast<std::size_t>(ids[m]) * hidden;
      std::copy(row, row + hidden, y.data + m * hidden);
    });
  }
  /// dE[ids[m],:] += dy[m,:]  (serial over m: repeated ids accumulate without races)
  static void backward(const Params& g, TensorView<const std::int64_t, 1> ids,
                       TensorView<const T, 2> dy) {
    const std::size_t hidden = g.weight.shape[1];
    for (std::size_t m = 0; m < ids.size(); ++m) {
      T* row = g.weight.data + static_cast<std::size_t>(ids[m]) * hidden;
      const T* d = dy.data + m * hidden;
      for (std::size_t j = 0; j < hidden; ++j) row[j] += d[j];
    }
  }
};

}  // namespace causalqwen::nn
