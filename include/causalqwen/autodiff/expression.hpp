/// Expression templates for fused elementwise chains. `var(value, grad)` makes a leaf; unary
/// functions from the table (`functions.hpp`) and + − × ÷ (also with scalars) build a lazy tree.
///   eval(out, e)        out[i]  = e(i)          one pass, parallel over i
///   eval_add(out, e)    out[i] += e(i)
///   backprop(e, dout)   every leaf's grad[i] += dout[i]·∂e(i)/∂leaf(i), one pass
/// e.g. SwiGLU: `auto a = silu(var(g, dg)) * var(u, du); eval(act, a); backprop(a, dact);`
/// Operands are held safely: temporaries by value, lvalue expression nodes by reference (as
/// Eigen), and leaves and scalars — views of a few words — always by value; so
/// `auto e = exp(var(x, dx)) + 1.0;` owns its whole tree, and a lambda
/// `[](auto a, auto b) { return silu(a) * b; }` returns no reference to its parameters.
#pragma once
#include "causalqwen/autodiff/functions.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"

#include <concepts>
#include <cstddef>
#include <type_traits>

namespace causalqwen::autodiff {

struct ExpressionTag {};
template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, ExpressionTag>;

template <class E>
struct is_view_node : std::false_type {};

/// How an expression node stores an operand of (forwarded) type E.
template <class E>
using hold_t = std::conditional_t<std::is_lvalue_reference_v<E> &&
                                      !is_view_node<std::remove_cvref_t<E>>::value,
                                  const std::remove_reference_t<E>&, std::remove_cvref_t<E>>;

/// A leaf: `n` values and (optionally, may be null) their gradient accumulator.
template <class T>
struct Leaf : ExpressionTag {
  using value_type = T;
  const T* value;
  T* grad;
  std::size_t n;
  T at(std::size_t i) const { return value[i]; }
  void backprop_at(std::size_t i, T g) const {
    if (grad) grad[i] += g;
  }
  std::size_t size() const { return n; }
};

template <class T>
struct is_view_node<Leaf<T>> : std::true_type {};

/// A differentiable leaf over `value`, accumulating into `grad` (same shape).
template <class T, std::size_t N>
Leaf<T> var(TensorView<const T, N> value, TensorView<T, N> grad) {
  detail::require(value.shape == grad.shape, "autodiff::var", "value {} and grad {} differ",
                  shape_text(value.shape), shape_text(grad.shape));
  return Leaf<T>{{}, value.data, grad.data, value.size()};
}
template <class T, std::size_t N>
Leaf<T> var(TensorView<T, N> value, TensorView<T, N> grad) {
  return var(TensorView<const T, N>(value), grad);
}
/// A constant leaf (no gradient).
template <class T, std::size_t N>
Leaf<std::remove_const_t<T>> constant(TensorView<T, N> value) {
  return Leaf<std::remove_const_t<T>>{{}, value.data, nullptr, value.size()};
}

/// A scalar broadcast to every element (no gradient).
template <class T>
struct Scalar : ExpressionTag {
  using value_type = T;
  T v;
  T at(std::size_t) const { return v; }
  void backprop_at(std::size_t, T) const {}
  std::size_t size() const { return 0; }  // 0: broadcasts
};

template <class T>
struct is_view_node<Scalar<T>> : std::true_type {};

/// f(e) for a table entry F.
template <class F, class E>
struct Unary : ExpressionTag {
  using value_type = typename std::remove_cvref_t<E>::value_type;
  using T = value_type;
  hold_t<E> e;
  T at(std::size_t i) const { return F::value(e.at(i)); }
  void backprop_at(std::size_t i, T g) const {
    const T x = e.at(i);
    e.backprop_at(i, g * F::derivative(x, F::value(x)));
  }
  std::size_t size() const { return e.size(); }
};

struct AddOp {
  template <class T> static T value(T a, T b) { return a + b; }
  template <class T> static T da(T, T) { return T(1); }
  template <class T> static T db(T, T) { return T(1); }
};
struct SubOp {
  template <class T> static T value(T a, T b) { return a - b; }
  template <class T> static T da(T, T) { return T(1); }
  template <class T> static T db(T, T) { return T(-1); }
};
struct MulOp {
  template <class T> static T value(T a, T b) { return a * b; }
  template <class T> static T da(T, T b) { return b; }
  template <class T> static T db(T a, T) { return a; }
};
struct DivOp {
  template <class T> static T value(T a, T b) { return a / b; }
  template <class T> static T da(T, T b) { return T(1) / b; }
  template <class T> static T db(T a, T b) { return -a / (b * b); }
};

/// a ∘ b for an operator Op.
template <class Op, class L, class R>
struct Binary : ExpressionTag {
  using value_type = typename std::remove_cvref_t<L>::value_type;
  using T = value_type;
  hold_t<L> l;
  hold_t<R> r;
  T at(std::size_t i) const { return Op::value(l.at(i), r.at(i)); }
  void backprop_at(std::size_t i, T g) const {
    const T a = l.at(i), b = r.at(i);
    l.backprop_at(i, g * Op::da(a, b));
    r.backprop_at(i, g * Op::db(a, b));
  }
  std::size_t size() const { return l.size() ? l.size() : r.size(); }
};

/// Applies the table entry F lazily: `apply<Silu>(e)`.
template <class F, Expression E>
auto apply(E&& e) {
  return Unary<F, E>{{}, std::forward<E>(e)};
}

#define CAUSALQWEN_AD_UNARY(fn, F) \
  template <Expression E>          \
  auto fn(E&& e) {                 \
    return apply<F>(std::forward<E>(e)); \
  }
CAUSALQWEN_AD_UNARY(operator-, Neg)
CAUSALQWEN_AD_UNARY(square, Square)
CAUSALQWEN_AD_UNARY(sqrt, Sqrt)
CAUSALQWEN_AD_UNARY(exp, Exp)
CAUSALQWEN_AD_UNARY(log, Log)
CAUSALQWEN_AD_UNARY(log1p, Log1p)
CAUSALQWEN_AD_UNARY(sigmoid, Sigmoid)
CAUSALQWEN_AD_UNARY(softplus, Softplus)
CAUSALQWEN_AD_UNARY(tanh, Tanh)
CAUSALQWEN_AD_UNARY(silu, Silu)
CAUSALQWEN_AD_UNARY(abs, Abs)
CAUSALQWEN_AD_UNARY(signed_log1p, SignedLog1p)
#undef CAUSALQWEN_AD_UNARY

namespace detail_expr {
template <class L, class R>
void require_same_size(const L& l, const R& r) {
  detail::require(l.size() == 0 || r.size() == 0 || l.size() == r.size(), "autodiff::expression",
                  "operands have {} and {} elements", l.size(), r.size());
}
template <class Op, class L, class R>
auto make_binary(L&& l, R&& r) {
  require_same_size(l, r);
  return Binary<Op, L, R>{{}, std::forward<L>(l), std::forward<R>(r)};
}
template <class E>
using scalar_of = Scalar<typename std::remove_cvref_t<E>::value_type>;
}  // namespace detail_expr

#define CAUSALQWEN_AD_BINARY(op, Op)                                                       \
  template <Expression L, Expression R>                                                    \
  auto operator op(L&& l, R&& r) {                                                         \
    return detail_expr::make_binary<Op>(std::forward<L>(l), std::forward<R>(r));           \
  }                                                                                        \
  template <Expression L>                                                                  \
  auto operator op(L&& l, typename std::remove_cvref_t<L>::value_type s) {                 \
    return detail_expr::make_binary<Op>(std::forward<L>(l), detail_expr::scalar_of<L>{{}, s}); \
  }                                                                                        \
  template <Expression R>                                                                  \
  auto operator op(typename std::remove_cvref_t<R>::value_type s, R&& r) {                 \
    return detail_expr::make_binary<Op>(detail_expr::scalar_of<R>{{}, s}, std::forward<R>(r)); \
  }
CAUSALQWEN_AD_BINARY(+, AddOp)
CAUSALQWEN_AD_BINARY(-, SubOp)
CAUSALQWEN_AD_BINARY(*, MulOp)
CAUSALQWEN_AD_BINARY(/, DivOp)
#undef CAUSALQWEN_AD_BINARY

/// out[i] = e(i), one fused pass (parallel for large sizes).
template <class T, std::size_t N, Expression E>
void eval(TensorView<T, N> out, const E& e) {
  detail::require(e.size() == out.size(), "autodiff::eval", "expression has {} elements, out {}",
                  e.size(), out.size());
  parallel_chunks(out.size(), [&](std::size_t b, std::size_t end) {
    for (std::size_t i = b; i < end; ++i) out.data[i] = e.at(i);
  });
}
/// out[i] += e(i).
template <class T, std::size_t N, Expression E>
void eval_add(TensorView<T, N> out, const E& e) {
  detail::require(e.size() == out.size(), "autodiff::eval_add",
                  "expression has {} elements, out {}", e.size(), out.size());
  parallel_chunks(out.size(), [&](std::size_t b, std::size_t end) {
    for (std::size_t i = b; i < end; ++i) out.data[i] += e.at(i);
  });
}
/// For every leaf ℓ with a gradient: ℓ.grad[i] += dout[i]·∂e(i)/∂ℓ(i), one fused pass.
template <class T, std::size_t N, Expression E>
void backprop(const E& e, TensorView<T, N> dout) {
  detail::require(e.size() == dout.size(), "autodiff::backprop",
                  "expression has {} elements, dout {}", e.size(), dout.size());
  parallel_chunks(dout.size(), [&](std::size_t b, std::size_t end) {
    for (std::size_t i = b; i < end; ++i) e.backprop_at(i, dout.data[i]);
  });
}

}  // namespace causalqwen::autodiff
