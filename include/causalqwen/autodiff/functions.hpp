/// The one table of elementwise functions (Adept style): each entry gives its value and its
/// derivative, the derivative taking both x and y = f(x) so that entries can use whichever is
/// cheaper (derivative-from-result: exp, sigmoid, tanh, sqrt). Expression templates
/// (`expression.hpp`) read derivatives only from here. A user adds a
/// function by writing a struct with the same three members and calling `apply<F>(e)`.
#pragma once
#include "causalqwen/cauchy/special.hpp"
#include "causalqwen/simd/exp_float.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace causalqwen::autodiff {

/// -x ; d/dx = -1
struct Neg {
  static constexpr const char* name = "neg";
  template <class T> static T value(T x) { return -x; }
  template <class T> static T derivative(T, T) { return T(-1); }
};
/// x² ; d/dx = 2x
struct Square {
  static constexpr const char* name = "square";
  template <class T> static T value(T x) { return x * x; }
  template <class T> static T derivative(T x, T) { return T(2) * x; }
};
/// √x ; d/dx = 1/(2y)
struct Sqrt {
  static constexpr const char* name = "sqrt";
  template <class T> static T value(T x) { return std::sqrt(x); }
  template <class T> static T derivative(T, T y) { return T(0.5) / y; }
};
/// eˣ ; d/dx = y
struct Exp {
  static constexpr const char* name = "exp";
  template <class T> static T value(T x) { return std::exp(x); }
  template <class T> static T derivative(T, T y) { return y; }
};
/// log x ; d/dx = 1/x
struct Log {
  static constexpr const char* name = "log";
  template <class T> static T value(T x) { return std::log(x); }
  template <class T> static T derivative(T x, T) { return T(1) / x; }
};
/// log(1+x) ; d/dx = 1/(1+x)
struct Log1p {
  static constexpr const char* name = "log1p";
  template <class T> static T value(T x) { return std::log1p(x); }
  template <class T> static T derivative(T x, T) { return T(1) / (T(1) + x); }
};
/// σ(x) = 1/(1+e⁻ˣ) ; d/dx = y(1−y)
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  template <class T> static T value(T x) { return raw::sigmoid(x); }  // from e^{−|x|}: no overflow
  template <class T> static T derivative(T, T y) { return y * (T(1) - y); }
};
/// tanh x ; d/dx = 1 − y²
struct Tanh {
  static constexpr const char* name = "tanh";
  template <class T> static T value(T x) { return std::tanh(x); }
  template <class T> static T derivative(T, T y) { return T(1) - y * y; }
};
/// silu(x) = x·σ(x) ; d/dx = σ(x)·(1 + x·(1 − σ(x)))
struct Silu {
  static constexpr const char* name = "silu";
  template <class T> static T value(T x) { return x / (T(1) + std::exp(-x)); }
  template <class T> static T derivative(T x, T) {
    const T s = T(1) / (T(1) + std::exp(-x));
    return s * (T(1) + x * (T(1) - s));
  }
};
/// a[i] = silu(g[i])·u[i] = g[i] / (1 + e^{−g[i]}) · u[i] for float arrays (SwiGLU's middle):
/// the same operations on the same values as `Silu::value(g[i]) * u[i]`, so the same bits.
inline void silu_times(const float* g, const float* u, float* a, std::size_t n) {
  for_each_exp_chunk(g, n, [](float x) { return -x; }, [&](std::size_t i0, std::size_t m, const float* e) {
    for (std::size_t i = 0; i < m; ++i) a[i0 + i] = g[i0 + i] / (1.0f + e[i]) * u[i0 + i];
  });
}
/// The gradients of a = silu(g)·u for float arrays (SwiGLU's backward), given da:
///   dg[i] += da[i]·u[i] · σ(1 + g[i](1 − σ)),  du[i] += da[i]·silu(g[i]),  σ = 1/(1 + e^{−g[i]})
/// the same operations on the same values as `backprop(silu(var(g, dg)) * var(u, du), da)`, so
/// the same bits.
inline void silu_times_backward(const float* g, const float* u, const float* da, float* dg, float* du, std::size_t n) {
  for_each_exp_chunk(g, n, [](float x) { return -x; }, [&](std::size_t i0, std::size_t m, const float* e) {
    for (std::size_t i = 0; i < m; ++i) {
      const float x = g[i0 + i], up = da[i0 + i];
      const float silu_x = x / (1.0f + e[i]);  // Silu::value
      const float s = 1.0f / (1.0f + e[i]);    // σ, as Silu::derivative forms it
      dg[i0 + i] += (up * u[i0 + i]) * (s * (1.0f + x * (1.0f - s)));
      du[i0 + i] += up * silu_x;
    }
  });
}
/// |x| ; d/dx = sign(x) (0 at 0)
struct Abs {
  static constexpr const char* name = "abs";
  template <class T> static T value(T x) { return std::abs(x); }
  template <class T> static T derivative(T x, T) { return T((x > T(0)) - (x < T(0))); }
};
/// softplus(x) = max(x,0) + log1p(e^{−|x|}) (the abduction scale) ; d/dx = σ(x), stable forms
struct Softplus {
  static constexpr const char* name = "softplus";
  template <class T> static T value(T x) { return raw::softplus(x); }
  template <class T> static T derivative(T x, T) { return raw::sigmoid(x); }
};
/// sign(x)·log(1+|x|) (the numeric-embedding magnitude) ; d/dx = 1/(1+|x|)
struct SignedLog1p {
  static constexpr const char* name = "signed_log1p";
  template <class T> static T value(T x) {
    return x < T(0) ? -std::log1p(-x) : std::log1p(x);
  }
  template <class T> static T derivative(T x, T) { return T(1) / (T(1) + std::abs(x)); }
};

}  // namespace causalqwen::autodiff
