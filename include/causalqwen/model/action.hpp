/// The action network: from the individuals U, the exogenous noise and the linear maps to the
/// class scores S and the value Y.
///   noise, deterministic:  A = U + |b_noise|·ε         loc_A = loc_U,  scale_A = scale_U + |b_noise|
///   noise, sampling:       A = U shifted by T·|b_noise|·ε, ε = tan(π(u − ½)) drawn per component:
///                          loc_A = loc_U + T·|b_noise|·ε,  scale_A = scale_U
///   classes:  S = linear(W_cls, b_cls, A)   loc_S = loc_A·W_clsᵀ + b_cls, scale_S = scale_A·|W_cls|ᵀ  [M,K]
///   value:    Y = linear(w_reg, b_reg, A)   loc_Y = loc_A·w_regᵀ + b_reg, scale_Y = scale_A·|w_reg|ᵀ  [M]
/// Both noises keep A independent (adding independent noise, or shifting by a constant), so the
/// linear maps are exact and S, Y are marginal: each component exactly Cauchy.
/// Parameters `causal.action.{cls,reg}.{weight,bias}`, `causal.action.b_noise` [C] and the OvR
/// thresholds `causal.ovr_threshold` [K].
#pragma once
#include "causalqwen/autodiff/expression.hpp"
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/cauchy/ovr.hpp"
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/cauchy_linear.hpp"
#include "causalqwen/model/abduction.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/slot_names.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace causalqwen::model {

/// Which noise the action network sees: on the scale (deterministic, training) or on the
/// location with a temperature (sampling).
enum class ActionMode { deterministic, sampling };

/// The sampling mode's noise: uniforms u ∈ (0,1) [M,C] and the temperature T ≥ 0.
template <class T>
struct SamplingNoise {
  T temperature = T(0);
  TensorView<const T, 2> uniform;
};

/// S: the class scores of M positions, [M,K] (or a chunk of classes), marginal.
template <class T>
using ClassScores = CauchyView<T, 2, Kind::marginal>;

template <class T>
struct Action {
  template <class V>
  struct ParamsOf {
    // [K,C], with its forms (linalg/weight.hpp): a packed copy for decoding; mixed precision's
    // Format::bf16 for the class products of > 16 rows and a current bf16 copy, which the
    // |cls_weight| products read with the sign bits cleared
    linalg::Weight<V> cls_weight;
    TensorView<V, 1> cls_bias;    // [K]
    linalg::Weight<V> reg_weight;  // [1,C]
    TensorView<V, 1> reg_bias;    // [1]
    TensorView<V, 1> b_noise;     // [C]
    TensorView<V, 1> threshold;   // [K]
    template <class A>
    static ParamsOf bind(A& arena) {
      return {arena.template view<2>(names::cls_w), arena.template view<1>(names::cls_b),
              arena.template view<2>(names::reg_w), arena.template view<1>(names::reg_b),
              arena.template view<1>(names::b_noise), arena.template view<1>(names::threshold)};
    }
  };
  using Params = ParamsOf<const T>;
  using Grads = ParamsOf<T>;

  struct Cache {
    ActionMode mode = ActionMode::deterministic;
    T temperature = T(0);
    std::vector<T> loc_A, scale_A, epsilon;  // [M,C]; epsilon only when sampling
  };

  static void add_params(Layout& layout, std::size_t causal_size, std::size_t num_classes) {
    layout.add(names::cls_w, {num_classes, causal_size});
    layout.add(names::cls_b, {num_classes});
    layout.add(names::reg_w, {1, causal_size});
    layout.add(names::reg_b, {1});
    layout.add(names::b_noise, {causal_size});
    layout.add(names::threshold, {num_classes});
  }

  /// Every parameter but cls.weight (copied from a base lm_head, or drawn): b_cls = 0,
  /// w_reg ~ Xavier-uniform U(−a, a), a = gain·√(6/(C + 1)), b_reg, b_noise and the thresholds
  /// from the configuration. Deterministic for a given seed.
  static void init(const Grads& p, const CausalConfig& cfg, std::uint64_t seed) {
    const std::size_t C = cfg.causal_size;
    std::fill(p.cls_bias.begin(), p.cls_bias.end(), T(0));
    std::mt19937_64 rng(seed);
    const double bound = cfg.reg_init_gain * std::sqrt(6.0 / static_cast<double>(C + 1));
    std::uniform_real_distribution<double> uniform(-bound, bound);
    for (auto& w : p.reg_weight.values) w = static_cast<T>(uniform(rng));
    p.reg_bias[0] = static_cast<T>(cfg.reg_bias_init);
    std::fill(p.b_noise.begin(), p.b_noise.end(), static_cast<T>(cfg.b_noise_init));
    for (std::size_t k = 0; k < cfg.num_classes; ++k) p.threshold[k] = static_cast<T>(cfg.threshold(k));
  }

  /// A from U by the mode's noise (see the file comment); A views `c`, its kind U's (added noise
  /// or a shift by constants keeps it).
  static Individuals<const T> noise(const Params& p, Individuals<const T> U, ActionMode mode,
                                    const SamplingNoise<T>& sampling, Cache& c) {
    const std::size_t M = U.loc.shape[0], C = U.loc.shape[1];
    c.mode = mode;
    c.temperature = sampling.temperature;
    c.loc_A.resize(M * C);
    c.scale_A.resize(M * C);
    c.epsilon.resize(mode == ActionMode::sampling ? M * C : 0);
    using autodiff::constant;
    const auto b_noise = autodiff::abs(constant(TensorView<const T, 1>(p.b_noise.data, {C})));  // |b_noise| [C]
    parallel_for(M, M * C, [&](std::size_t m) {
      const auto row = [&](const T* v) { return TensorView<const T, 1>(v + m * C, {C}); };
      const auto out = [&](std::vector<T>& v) { return TensorView<T, 1>(v.data() + m * C, {C}); };
      if (mode == ActionMode::deterministic) {
        std::copy_n(U.loc.data + m * C, C, c.loc_A.data() + m * C);
        autodiff::eval(out(c.scale_A), constant(row(U.scale.data)) + b_noise);  // scale_U + |b_noise|
      } else {
        for (std::size_t j = 0; j < C; ++j)
          c.epsilon[m * C + j] = raw::standard_quantile(sampling.uniform.data[m * C + j]);
        autodiff::eval(out(c.loc_A), constant(row(U.loc.data)) +
                                         c.temperature * b_noise * constant(row(c.epsilon.data())));  // loc_U + T·|b|·ε
        std::copy_n(U.scale.data + m * C, C, c.scale_A.data() + m * C);
      }
    });
    return output(c, U);
  }
  /// A from the cache of the last noise(U), for the U it was computed from.
  static Individuals<const T> output(const Cache& c, Individuals<const T> U) {
    const CauchyOut<const T, 2> out{{c.loc_A.data(), U.loc.shape}, {c.scale_A.data(), U.loc.shape}};
    if (c.mode == ActionMode::deterministic) return result_view(ops::add_noise{}, U, out);
    return result_view(ops::affine{}, U, out);  // loc_U shifted by the constants T·|b_noise|·ε
  }

  /// Back through the noise: ∂L/∂U = ∂L/∂A in both modes (so dA is dU), and
  /// ∂L/∂b_noise_j += sign(b_j)·Σ_m ∂L/∂scale_A[m,j] (deterministic) or
  ///                  sign(b_j)·Σ_m ∂L/∂loc_A[m,j]·T·ε[m,j] (sampling).
  static void noise_backward(const Params& p, const Grads& g, const Cache& c, CauchyViewGrad<const T, 2> dA) {
    const std::size_t M = dA.d_loc.shape[0], C = dA.d_loc.shape[1];
    constexpr std::size_t block = 64;  // columns summed together, row after row (each in order of m)
    for (std::size_t j0 = 0; j0 < C; j0 += block) {
      const std::size_t width = std::min(block, C - j0);
      T acc[block] = {};
      for (std::size_t m = 0; m < M; ++m) {
        const std::size_t i = m * C + j0;
        if (c.mode == ActionMode::deterministic)
          for (std::size_t j = 0; j < width; ++j) acc[j] += dA.d_scale.data[i + j];
        else
          for (std::size_t j = 0; j < width; ++j) acc[j] += dA.d_loc.data[i + j] * c.temperature * c.epsilon[i + j];
      }
      for (std::size_t j = 0; j < width; ++j) g.b_noise[j0 + j] += sign(p.b_noise[j0 + j]) * acc[j];
    }
  }

  /// Y of one position a [C] (row_of(A, m)), the linear map of the value head:
  ///   loc_Y = b_reg + Σ_j w_reg,j·loc_A,j,  scale_Y = Σ_j |w_reg,j|·scale_A,j.
  /// A must be independent: any other kind stops compilation with the algebra's sentence.
  template <Kind K>
  static CauchyParams<T> value(const Params& p, CauchyView<const T, 1, K> a) {
    return linalg::cauchy_linear<T>(p.reg_weight, 0, p.reg_bias[0], a);
  }
  /// S_k of one position a [C]: loc = b_cls,k + Σ_j W_kj·loc_A,j,  scale = Σ_j |W_kj|·scale_A,j.
  template <Kind K>
  static CauchyParams<T> class_score(const Params& p, std::size_t k, CauchyView<const T, 1, K> a) {
    return linalg::cauchy_linear<T>(p.cls_weight, k, p.cls_bias[k], a);
  }
  /// S for classes [k0, k0 + n) of R positions: linear(W_cls, b_cls, A) written into `out` [R,n]
  /// and returned as the marginal view over it (abs_w: |W_cls| of those classes, [n,C]; see
  /// linalg::cauchy_linear). A must be independent: any other kind stops compilation with the
  /// algebra's sentence.
  template <Kind K>
  static ClassScores<T> classes(const Params& p, CauchyView<const T, 2, K> A, std::size_t k0, std::size_t n,
                                TensorView<const T, 2> abs_w, CauchyOut<T, 2> out) {
    return linalg::cauchy_linear<T, K>(out, p.cls_weight.rows(k0, n).with_abs(abs_w),
                                       TensorView<const T, 1>(p.cls_bias.data + k0, {n}), A);
  }

  static T sign(T x) { return T((x > T(0)) - (x < T(0))); }
};

}  // namespace causalqwen::model
