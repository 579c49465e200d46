/// The abduction network: from the backbone's output z, the distribution of each position's
/// individual U, C independent Cauchy components:
///   loc_U   = z·W_locᵀ + b_loc                       [M,C]
///   scale_U = floor + softplus(z·W_scaleᵀ + b_scale)  [M,C]   (> floor ≥ 0 by construction;
///                                                              the floor is config's scale_U_floor)
/// Parameters `causal.abduction.{loc,scale}.{weight,bias}`, W [C,H], b [C]; initialised with
/// W_loc = I (so C = H), b_loc = 0, W_scale = 0, b_scale = softplus⁻¹(γ_init): at the start
/// U = Cauchy(z, γ_init).
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/cauchy/cauchy_view.hpp"
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/model/slot_names.hpp"

#include <string>
#include <vector>

namespace causalqwen::model {

/// U: the individuals of M positions, independent Cauchy components [M,C].
template <class T>
using Individuals = CauchyView<T, 2, Kind::independent>;

template <class T>
struct Abduction {
  /// Views of the parameters (or, with the same layout, of their gradients).
  template <class V>
  struct ParamsOf {
    TensorView<V, 2> loc_weight, scale_weight;  // [C,H]
    TensorView<V, 1> loc_bias, scale_bias;      // [C]
    template <class A>
    static ParamsOf bind(A& arena) {
      return {arena.template view<2>(names::abd_loc_w), arena.template view<2>(names::abd_scale_w),
              arena.template view<1>(names::abd_loc_b), arena.template view<1>(names::abd_scale_b)};
    }
  };
  using Params = ParamsOf<const T>;
  using Grads = ParamsOf<T>;

  /// What backward needs, and U itself (grown once, reused).
  struct Cache {
    std::vector<T> loc_U, pre_scale, scale_U;  // [M,C] each
  };

  static void add_params(Layout& layout, std::size_t causal_size, std::size_t hidden_size) {
    layout.add(names::abd_loc_w, {causal_size, hidden_size});
    layout.add(names::abd_loc_b, {causal_size});
    layout.add(names::abd_scale_w, {causal_size, hidden_size});
    layout.add(names::abd_scale_b, {causal_size});
  }

  /// W_loc = I, b_loc = 0, W_scale = 0, b_scale = softplus⁻¹(γ_init).
  static void init(const Grads& p, double gamma_init) {
    std::fill(p.loc_weight.begin(), p.loc_weight.end(), T(0));
    for (std::size_t i = 0; i < std::min(p.loc_weight.shape[0], p.loc_weight.shape[1]); ++i) p.loc_weight(i, i) = T(1);
    std::fill(p.loc_bias.begin(), p.loc_bias.end(), T(0));
    std::fill(p.scale_weight.begin(), p.scale_weight.end(), T(0));
    std::fill(p.scale_bias.begin(), p.scale_bias.end(), static_cast<T>(inv_softplus(gamma_init)));
  }

  /// U = (z·W_locᵀ + b_loc, floor + softplus(z·W_scaleᵀ + b_scale)) for z [M,H]; U views `c`.
  static Individuals<const T> forward(const Params& p, TensorView<const T, 2> z, Cache& c, T scale_floor = T(0)) {
    const std::size_t M = z.shape[0], C = p.loc_weight.shape[0];
    for (auto* v : {&c.loc_U, &c.pre_scale, &c.scale_U}) v->resize(M * C);
    const TensorView<T, 2> loc(c.loc_U.data(), {M, C}), pre(c.pre_scale.data(), {M, C}), scale(c.scale_U.data(), {M, C});
    linalg::linear_forward<T>(loc, z, p.loc_weight, p.loc_bias);
    linalg::linear_forward<T>(pre, z, p.scale_weight, p.scale_bias);
    activate(pre, scale, scale_floor);
    return individuals(c, C);
  }

  /// The scale's elementwise step, one expression pass: scale = floor + softplus(pre)
  /// = floor + max(pre, 0) + log1p(e^{−|pre|})  [M,C] (the floor's add only when it is not 0).
  static void activate(TensorView<const T, 2> pre, TensorView<T, 2> scale, T scale_floor = T(0)) {
    const auto softplus_pre = autodiff::softplus(autodiff::constant(pre));
    if (scale_floor != T(0))
      autodiff::eval(scale, softplus_pre + scale_floor);
    else
      autodiff::eval(scale, softplus_pre);
  }
  /// Its backward: d_pre = d_scale·softplus'(pre) = d_scale·σ(pre), σ from e^{−|pre|}  [M,C]
  /// (d_pre may be d_scale's own storage).
  static void activate_backward(TensorView<const T, 2> pre, TensorView<const T, 2> d_scale, TensorView<T, 2> d_pre) {
    autodiff::eval(d_pre, autodiff::constant(d_scale) * autodiff::sigmoid(autodiff::constant(pre)));
  }

  /// U from the cache of the last forward (C components per position): the abduction network is
  /// the source of the independent kind (cauchy_view.hpp), the model's assumption on individuals.
  static Individuals<const T> individuals(const Cache& c, std::size_t causal_size) {
    const std::size_t M = causal_size == 0 ? 0 : c.loc_U.size() / causal_size;
    return {KindKey{}, TensorView<const T, 2>(c.loc_U.data(), {M, causal_size}),
            TensorView<const T, 2>(c.scale_U.data(), {M, causal_size})};
  }

  /// From dU = (∂L/∂loc_U, ∂L/∂scale_U) [M,C]: the parameters' gradients g += ∂L/∂θ and
  /// dz [M,H] += ∂L/∂z. dU.d_scale is overwritten with ∂L/∂(z·W_scaleᵀ + b_scale).
  static void backward(const Params& p, const Grads& g, TensorView<const T, 2> z, const Cache& c,
                       CauchyViewGrad<T, 2> dU, TensorView<T, 2> dz, linalg::WeightGradSink<T>* sink = nullptr) {
    const std::size_t M = z.shape[0], C = p.loc_weight.shape[0];
    const TensorView<T, 2> d_pre = dU.d_scale;  // in place: d_pre = d_scale_U·σ(pre)
    activate_backward(TensorView<const T, 2>(c.pre_scale.data(), {M, C}), dU.d_scale, d_pre);
    const TensorView<const T, 2> dl(dU.d_loc), dp(d_pre);
    linalg::linear_backward_input<T>(dz, dl, p.loc_weight);
    linalg::linear_backward_input<T>(dz, dp, p.scale_weight);
    linalg::linear_backward_weight<T>(g.loc_weight, dl, z, sink);
    linalg::linear_backward_weight<T>(g.scale_weight, dp, z, sink);
    linalg::bias_backward<T>(g.loc_bias, dl);
    linalg::bias_backward<T>(g.scale_bias, dp);
  }
};

}  // namespace causalqwen::model
