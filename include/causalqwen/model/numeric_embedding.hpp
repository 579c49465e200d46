/// NumericEmbedding: e = embed(x) + sign(v)·log1p(|v|)·ê, ê = d/‖d‖ (a learned direction,
/// normalised in the forward pass so its gradient flows through the normalisation).
/// v = 0 (every non-number position) adds nothing. Parameters `model.embed_tokens.weight` [V,H]
/// (the Qwen2 token embedding) and `causal.num_direction` [H] (d, not normalised).
#pragma once
#include "causalqwen/autodiff/functions.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/model/slot_names.hpp"
#include "causalqwen/nn/embedding.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace causalqwen::model {

template <class T>
struct NumericEmbedding {
  inline static const std::string embed_name = "model.embed_tokens.weight";

  struct Params {
    TensorView<T, 2> embed;      // [V,H]  model.embed_tokens.weight
    TensorView<T, 1> direction;  // [H]    causal.num_direction (d, not normalised)
    /// Views of the slots in `arena` (parameters or, with the same layout, gradients).
    template <class A>
    static Params bind(A& arena) {
      return {arena.template view<2>(embed_name), arena.template view<1>(names::num_direction)};
    }
  };

  static void add_params(Layout& layout, std::size_t vocab_size, std::size_t hidden_size) {
    layout.add(embed_name, {vocab_size, hidden_size});
    layout.add(names::num_direction, {hidden_size});
  }
  struct Cache {
    std::vector<std::int64_t> ids;  // [M]
    std::vector<T> magnitude;       // [M] f(v) = sign(v)·log1p(|v|)
    std::vector<T> values;          // [M] v
    std::vector<T> unit;            // [H] ê
    T norm = 0;                     // ‖d‖
    mutable std::vector<T> sum;     // [H] backward scratch (kept to avoid a per-step allocation)
  };

  /// e[m,:] = E[ids[m],:] + f(v[m])·d/‖d‖ :  ids, v [M] → e [M,H]; v may be empty (all 0).
  static void forward(const Params& p, TensorView<const std::int64_t, 1> ids,
                      TensorView<const T, 1> values, TensorView<T, 2> e, Cache& c) {
    using autodiff::SignedLog1p;
    using nn::Embedding;
    const std::size_t hidden = p.embed.shape[1], rows = ids.size();
    require_shape(p.direction, {hidden}, "NumericEmbedding::forward", "direction");
    if (!values.empty()) require_shape(values, {rows}, "NumericEmbedding::forward", "numeric values");
    Embedding<T>::forward({p.embed}, ids, e);
    double sq = 0;
    for (std::size_t j = 0; j < hidden; ++j) sq += double(p.direction[j]) * p.direction[j];
    c.norm = static_cast<T>(std::sqrt(sq));
    detail::require(c.norm > T(0), "NumericEmbedding::forward",
                    "the numeric direction has norm 0 (initialise causal.num_direction)");
    c.unit.resize(hidden);
    for (std::size_t j = 0; j < hidden; ++j) c.unit[j] = p.direction[j] / c.norm;
    c.ids.assign(ids.begin(), ids.end());
    c.values.assign(rows, T(0));
    c.magnitude.assign(rows, T(0));
    if (values.empty()) return;
    for (std::size_t m = 0; m < rows; ++m) {
      c.values[m] = values[m];
      const T f = SignedLog1p::value(values[m]);
      c.magnitude[m] = f;
      if (f == T(0)) continue;
      T* row = e.data + m * hidden;
      for (std::size_t j = 0; j < hidden; ++j) row[j] += f * c.unit[j];
    }
  }

  /// dE[ids[m]] += de[m];  g = Σ_m f(v_m)·de[m];  dd += (g − ê(ê·g)) / ‖d‖;
  /// dv[m] += f'(v_m)·(ê·de[m]) when dv is given (non-empty).
  static void backward(const Params& g, const Cache& c, TensorView<const T, 2> de,
                       TensorView<T, 1> dvalues = {}) {
    using autodiff::SignedLog1p;
    using nn::Embedding;
    const std::size_t hidden = g.embed.shape[1], rows = c.ids.size();
    Embedding<T>::backward({g.embed}, TensorView<const std::int64_t, 1>(c.ids.data(), {rows}), de);
    auto& sum = c.sum;  // g [H]
    sum.assign(hidden, T(0));
    for (std::size_t m = 0; m < rows; ++m) {
      const T f = c.magnitude[m];
      const T* d = de.data + m * hidden;
      if (f != T(0))
        for (std::size_t j = 0; j < hidden; ++j) sum[j] += f * d[j];
      if (!dvalues.empty()) {
        T dot = 0;
        for (std::size_t j = 0; j < hidden; ++j) dot += c.unit[j] * d[j];
        dvalues[m] += SignedLog1p::derivative(c.values[m], f) * dot;
      }
    }
    T unit_dot = 0;
    for (std::size_t j = 0; j < hidden; ++j) unit_dot += c.unit[j] * sum[j];
    for (std::size_t j = 0; j < hidden; ++j)
      g.direction[j] += (sum[j] - c.unit[j] * unit_dot) / c.norm;
  }
};

}  // namespace causalqwen::model
