/// RMSNorm: y = w ⊙ x / sqrt(mean(x²) + eps)  (plain w, Qwen2 convention), row by row.
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"

#include <cmath>

namespace causalqwen::nn {

template <class T>
struct RMSNorm {
  struct Params {
    TensorView<T, 1> weight;  // [H]
  };
  struct Cache {
    TensorView<const T, 2> x;  // [M,H] the input (kept alive by the caller)
    TensorView<T, 1> inv_rms;  // [M] r = 1/sqrt(mean(x²)+eps), storage given by the caller
  };

  /// r_m = 1/sqrt(Σ_j x²_mj / H + eps);  y_mj = w_j·x_mj·r_m
  static void forward(const Params& p, T eps, TensorView<const T, 2> x, TensorView<T, 2> y,
                      Cache& c) {
    const std::size_t rows = x.shape[0], hidden = x.shape[1];
    require_shape(p.weight, {hidden}, "RMSNorm::forward", "weight");
    require_shape(y, x.shape, "RMSNorm::forward", "output");
    require_shape(c.inv_rms, {rows}, "RMSNorm::forward", "inv_rms");
    c.x = x;
    parallel_for(rows, rows * hidden, [&](std::size_t m) {
      const T* xr = x.data + m * hidden;
      T* yr = y.data + m * hidden;
      T sq = 0;
      for (std::size_t j = 0; j < hidden; ++j) sq += xr[j] * xr[j];
      const T r = T(1) / std::sqrt(sq / T(hidden) + eps);
      c.inv_rms[m] = r;
      using autodiff::constant;
      const auto row = [&](const T* v) { return TensorView<const T, 1>(v, {hidden}); };
      autodiff::eval(TensorView<T, 1>(yr, {hidden}), constant(row(p.weight.data)) * (constant(row(xr)) * r));  // y_m = w ⊙ (x_m·r_m)
    });
  }

  /// dw_j += Σ_m dy_mj·x_mj·r_m ;
  /// dx_mj += r_m·w_j·dy_mj − r_m³·x_mj·(Σ_k w_k·dy_mk·x_mk)/H
  static void backward(const Params& p, const Params& g, const Cache& c,
                       TensorView<const T, 2> dy, TensorView<T, 2> dx) {
    const std::size_t rows = c.x.shape[0], hidden = c.x.shape[1];
    require_shape(dy, c.x.shape, "RMSNorm::backward", "dy");
    require_shape(dx, c.x.shape, "RMSNorm::backward", "dx");
    parallel_for(rows, rows * hidden, [&](std::size_t m) {
      const T* xr = c.x.data + m * hidden;
      const T* dyr = dy.data + m * hidden;
      T* dxr = dx.data + m * hidden;
      const T r = c.inv_rms[m];
      T dot = 0;
      for (std::size_t j = 0; j < hidden; ++j) dot += p.weight[j] * dyr[j] * xr[j];
      const T k = r * r * r * dot / T(hidden);
      for (std::size_t j = 0; j < hidden; ++j) dxr[j] += r * p.weight[j] * dyr[j] - k * xr[j];
    });
    // dw: serial over rows (M·H multiply-adds, vectorised over j; no races).
    for (std::size_t m = 0; m < rows; ++m) {
      const T* xr = c.x.data + m * hidden;
      const T* dyr = dy.data + m * hidden;
      const T r = c.inv_rms[m];
      for (std::size_t j = 0; j < hidden; ++j) g.weight[j] += dyr[j] * xr[j] * r;
    }
  }
};

}  // namespace causalqwen::nn
