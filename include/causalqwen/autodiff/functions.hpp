/// The one table of elementwise functions (Adept style): each entry gives its value and its
/// derivative, the derivative taking both x and y = f(x) so that entries can use whichever is
/// cheaper (derivative-from-result: exp, sigmoid, tanh, sqrt). Expression templates
/// (`expression.hpp`) read derivatives only from here. A user adds a
/// function by writing a struct with the same three members and calling `apply<F>(e)`.
/// An entry built on one exponential e = e^{a(x)} may also give `exp_argument(x)` = a(x),
/// `value_from_exp(x, e)` and `derivative_from_exp(x, e)` (the `ExpEntry` concept): chunked
/// evaluation then forms a chunk's exponentials with the vector exp (`exp_float`) and applies
/// those to each element. An exp-built entry whose value is a function of l = log1p(e), with
/// e ∈ [0, 1], may also give `value_from_log1p_exp(x, l)` (the `Log1pExpEntry` concept, softplus):
/// chunked evaluation then forms the chunk's l from its exponentials with the vector log1p
/// (`log1p_unit_float`), the derivative still from e alone.
#pragma once
#include "causalqwen/cauchy/special.hpp"

#include <algorithm>
#include <concepts>
#include <cmath>
#include <cstddef>

namespace causalqwen::autodiff {

/// An entry whose value and derivative come from one exponential e = e^{exp_argument(x)}.
template <class F, class T>
concept ExpEntry = requires(T x) {
  { F::exp_argument(x) } -> std::same_as<T>;
  { F::value_from_exp(x, x) } -> std::same_as<T>;
  { F::derivative_from_exp(x, x) } -> std::same_as<T>;
};

/// An exp-built entry whose value comes from l = log1p(e), e = e^{exp_argument(x)} ∈ [0, 1].
template <class F, class T>
concept Log1pExpEntry = ExpEntry<F, T> && requires(T x) {
  { F::value_from_log1p_exp(x, x) } -> std::same_as<T>;
};

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
/// eˣ ; d/dx = y (chunked evaluation takes e = eˣ from the vector exp)
struct Exp {
  static constexpr const char* name = "exp";
  template <class T> static T exp_argument(T x) { return x; }
  template <class T> static T value_from_exp(T, T e) { return e; }
  template <class T> static T derivative_from_exp(T, T e) { return e; }
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
/// σ(x) = 1/(1+e⁻ˣ) ; d/dx = y(1−y), both from e = e^{−|x|} (no overflow):
/// σ = 1/(1 + e) for x ≥ 0, e/(1 + e) below (`raw::sigmoid`'s operations)
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  template <class T> static T exp_argument(T x) { return -std::fabs(x); }
  template <class T> static T value_from_exp(T x, T e) { return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e); }
  template <class T> static T derivative_from_exp(T x, T e) {
    const T y = value_from_exp(x, e);
    return y * (T(1) - y);
  }
  template <class T> static T value(T x) { return raw::sigmoid(x); }
  template <class T> static T derivative(T, T y) { return y * (T(1) - y); }
};
/// tanh x ; d/dx = 1 − y²
struct Tanh {
  static constexpr const char* name = "tanh";
  template <class T> static T value(T x) { return std::tanh(x); }
  template <class T> static T derivative(T, T y) { return T(1) - y * y; }
};
/// silu(x) = x·σ(x) = x / (1 + e⁻ˣ) ; d/dx = σ(x)·(1 + x·(1 − σ(x))), σ = 1/(1 + e⁻ˣ).
/// Both from e = e⁻ˣ (`exp_argument`): chunked evaluation forms e for a whole chunk with the
/// vector exp and applies `value_from_exp` / `derivative_from_exp`, the very operations of
/// `value` / `derivative`, so both give the same bits.
struct Silu {
  static constexpr const char* name = "silu";
  template <class T> static T exp_argument(T x) { return -x; }
  template <class T> static T value_from_exp(T x, T e) { return x / (T(1) + e); }
  template <class T> static T derivative_from_exp(T x, T e) {
    const T s = T(1) / (T(1) + e);
    return s * (T(1) + x * (T(1) - s));
  }
  template <class T> static T value(T x) { return value_from_exp(x, std::exp(exp_argument(x))); }
  template <class T> static T derivative(T x, T) { return derivative_from_exp(x, std::exp(exp_argument(x))); }
};
/// |x| ; d/dx = sign(x) (0 at 0)
struct Abs {
  static constexpr const char* name = "abs";
  template <class T> static T value(T x) { return std::abs(x); }
  template <class T> static T derivative(T x, T) { return T((x > T(0)) - (x < T(0))); }
};
/// softplus(x) = max(x, 0) + log1p(e) (the abduction scale) ; d/dx = σ(x) = 1/(1 + e) for x ≥ 0,
/// e/(1 + e) below; both from e = e^{−|x|} ∈ [0, 1], so neither overflows. The value from
/// l = log1p(e) (`Log1pExpEntry`): chunked evaluation in float takes e from the vector exp and l
/// from the vector log1p, the operations of `raw::softplus` and `raw::sigmoid`, so the same bits.
struct Softplus {
  static constexpr const char* name = "softplus";
  template <class T> static T exp_argument(T x) { return -std::fabs(x); }
  template <class T> static T value_from_log1p_exp(T x, T l) { return std::fmax(x, T(0)) + l; }
  template <class T> static T value_from_exp(T x, T e) { return value_from_log1p_exp(x, T(std::log1p(e))); }
  template <class T> static T derivative_from_exp(T x, T e) { return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e); }
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
