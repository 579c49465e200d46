/// Expression templates for fused elementwise chains. `var(value, grad)` makes a leaf; unary
/// functions from the table (`functions.hpp`) and + − × ÷ (also with scalars) build a lazy tree.
///   eval(out, e)        out[i]  = e(i)          one pass, parallel over i
///   eval_add(out, e)    out[i] += e(i)
///   backprop(e, dout)   every leaf's grad[i] += dout[i]·∂e(i)/∂leaf(i), one pass
/// e.g. SwiGLU: `auto a = silu(var(g, dg)) * var(u, du); eval(act, a); backprop(a, dact);`
/// The three walk the index range in chunks of `chunk_size`: in float each node of a table entry
/// built on an exponential (`ExpEntry`: silu, exp, sigmoid) first forms the chunk's exponentials
/// at once (`exp_float`, 16 or 8 at a time), and an entry whose value is log1p of that
/// exponential (`Log1pExpEntry`: softplus) also its logarithms (`log1p_unit_float`, only where
/// the pass reads the node's values), then one loop applies every node's per-element formula,
/// which the compiler vectorises. Each element sees the same operations in the same order as the
/// scalar `e.at(i)` / `e.backprop_at(i, g)`, so the same bits.
/// The per-element loops are declared free of dependences between elements (`omp simd` under
/// GCC, so no run-time aliasing checks): an output or gradient may be an operand's own storage,
/// element i read before it is written, but must not overlap an operand at another offset.
/// Operands are held safely: temporaries by value, lvalue expression nodes by reference (as
/// Eigen), and leaves and scalars — views of a few words — always by value; so
/// `auto e = exp(var(x, dx)) + 1.0;` owns its whole tree, and a lambda
/// `[](auto a, auto b) { return silu(a) * b; }` returns no reference to its parameters.
#pragma once
#include "causalqwen/autodiff/functions.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/simd/exp_float.hpp"
#include "causalqwen/simd/log1p_float.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <type_traits>

/// The per-element loops' annotation: `omp simd` under GCC (the loops are then vectorised without
/// run-time aliasing checks); none under other compilers, since Clang reports a loop it cannot
/// vectorise under the pragma (one calling std::exp) as a warning.
#if defined(__GNUC__) && !defined(__clang__)
#define CAUSALQWEN_ELEMENTWISE_LOOP _Pragma("omp simd")
#else
#define CAUSALQWEN_ELEMENTWISE_LOOP
#endif

namespace causalqwen::autodiff {

struct ExpressionTag {};
template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, ExpressionTag>;

template <class E>
struct is_view_node : std::false_type {};

/// Elements per chunk of a chunked pass: small, so that a chunk's operands, read once by the
/// exponential pass and again by the formula pass, are still in L1 the second time.
inline constexpr std::size_t chunk_size = 128;

/// A node's scratch for one chunk (the exponentials of its subtree's exp-built nodes).
template <class E>
using state_of = typename std::remove_cvref_t<E>::State;

/// The scratch of a node that needs none.
struct NoState {};

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
  // the chunked forms: element i, the k-th of its chunk
  using State = NoState;
  void prepare(State&, std::size_t, std::size_t, bool = true) const {}
  T at(const State&, std::size_t i, std::size_t) const { return value[i]; }
  void backprop_at(const State&, std::size_t i, std::size_t, T g) const {
    if (grad) grad[i] += g;
  }
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
  using State = NoState;
  void prepare(State&, std::size_t, std::size_t, bool = true) const {}
  T at(const State&, std::size_t, std::size_t) const { return v; }
  void backprop_at(const State&, std::size_t, std::size_t, T) const {}
};

template <class T>
struct is_view_node<Scalar<T>> : std::true_type {};

/// The exponentials (or their logarithms) of one chunk for an exp-built node (none for the
/// others), on a cache-line boundary so that the vector functions' and the formula loop's 64-byte
/// accesses never split a line.
template <class T, bool needed>
struct ChunkExps {
  alignas(64) T v[chunk_size];
};
template <class T>
struct ChunkExps<T, false> {};

/// f(e) for a table entry F.
template <class F, class E>
struct Unary : ExpressionTag {
  using value_type = typename std::remove_cvref_t<E>::value_type;
  using T = value_type;
  /// Whether the chunk's exponentials are formed at once: for an exp-built entry in float (a
  /// vector exp exists); in double the per-element formula calls std::exp inline, which runs
  /// faster than a separate pass of scalar calls.
  static constexpr bool from_exp = ExpEntry<F, T> && std::is_same_v<T, float>;
  /// Whether the value is then taken from the chunk's l = log1p(e), formed at once (vector log1p).
  static constexpr bool from_log1p = from_exp && Log1pExpEntry<F, T>;
  hold_t<E> e;
  T at(std::size_t i) const { return F::value(e.at(i)); }
  void backprop_at(std::size_t i, T g) const {
    const T x = e.at(i);
    e.backprop_at(i, g * F::derivative(x, F::value(x)));
  }
  std::size_t size() const { return e.size(); }

  struct State {
    [[no_unique_address]] state_of<E> e;
    [[no_unique_address]] ChunkExps<T, from_exp> exps;
    [[no_unique_address]] ChunkExps<T, from_log1p> logs;
  };
  /// Prepares the operand (its values: this node's formulas read them), then
  /// exps[k] = e^{a(x[i0 + k])} for the chunk [i0, i0 + m), and logs[k] = log1p(exps[k]) when
  /// the pass reads this node's `values` (not at the root of backprop, which reads only its
  /// derivative).
  void prepare(State& s, std::size_t i0, std::size_t m, bool values = true) const {
    e.prepare(s.e, i0, m);
    if constexpr (from_exp) {
CAUSALQWEN_ELEMENTWISE_LOOP
      for (std::size_t k = 0; k < m; ++k) s.exps.v[k] = F::exp_argument(e.at(s.e, i0 + k, k));
      exp_float(s.exps.v, s.exps.v, m);
      if constexpr (from_log1p)
        if (values) log1p_unit_float(s.exps.v, s.logs.v, m);
    }
  }
  T at(const State& s, std::size_t i, std::size_t k) const {
    const T x = e.at(s.e, i, k);
    if constexpr (from_log1p)
      return F::value_from_log1p_exp(x, s.logs.v[k]);
    else if constexpr (from_exp)
      return F::value_from_exp(x, s.exps.v[k]);
    else
      return F::value(x);
  }
  void backprop_at(const State& s, std::size_t i, std::size_t k, T g) const {
    const T x = e.at(s.e, i, k);
    if constexpr (from_exp)
      e.backprop_at(s.e, i, k, g * F::derivative_from_exp(x, s.exps.v[k]));
    else
      e.backprop_at(s.e, i, k, g * F::derivative(x, F::value(x)));
  }
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

  struct State {
    [[no_unique_address]] state_of<L> l;
    [[no_unique_address]] state_of<R> r;
  };
  /// The operands' values are read (by Op and its derivatives) in every pass.
  void prepare(State& s, std::size_t i0, std::size_t m, bool = true) const {
    l.prepare(s.l, i0, m);
    r.prepare(s.r, i0, m);
  }
  T at(const State& s, std::size_t i, std::size_t k) const { return Op::value(l.at(s.l, i, k), r.at(s.r, i, k)); }
  void backprop_at(const State& s, std::size_t i, std::size_t k, T g) const {
    const T a = l.at(s.l, i, k), b = r.at(s.r, i, k);
    l.backprop_at(s.l, i, k, g * Op::da(a, b));
    r.backprop_at(s.r, i, k, g * Op::db(a, b));
  }
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

namespace detail_expr {
/// Calls f(s, i0, m) for the chunks [i0, i0 + m) of [0, n), after e.prepare(s, i0, m, values)
/// (values: whether f reads e's values, or only its derivatives); the chunks are split over the
/// threads (parallel_chunks), each thread with its own scratch s.
template <class E, class F>
void for_each_chunk(const E& e, std::size_t n, bool values, F&& f) {
  parallel_chunks(n, [&](std::size_t b, std::size_t end) {
    state_of<E> s;
    const auto chunk = [&](std::size_t i0, std::size_t m) {
      e.prepare(s, i0, m, values);
      f(s, i0, m);
    };
    std::size_t i0 = b;
    for (; i0 + chunk_size <= end; i0 += chunk_size) chunk(i0, chunk_size);  // a constant count
    if (i0 < end) chunk(i0, end - i0);
  });
}
}  // namespace detail_expr

/// out[i] = e(i), one fused pass in chunks (parallel for large sizes).
template <class T, std::size_t N, Expression E>
void eval(TensorView<T, N> out, const E& e) {
  detail::require(e.size() == out.size(), "autodiff::eval", "expression has {} elements, out {}",
                  e.size(), out.size());
  T* o = out.data;
  detail_expr::for_each_chunk(e, out.size(), true, [&](const state_of<E>& s, std::size_t i0, std::size_t m) {
CAUSALQWEN_ELEMENTWISE_LOOP
    for (std::size_t k = 0; k < m; ++k) o[i0 + k] = e.at(s, i0 + k, k);
  });
}
/// out[i] += e(i).
template <class T, std::size_t N, Expression E>
void eval_add(TensorView<T, N> out, const E& e) {
  detail::require(e.size() == out.size(), "autodiff::eval_add",
                  "expression has {} elements, out {}", e.size(), out.size());
  T* o = out.data;
  detail_expr::for_each_chunk(e, out.size(), true, [&](const state_of<E>& s, std::size_t i0, std::size_t m) {
CAUSALQWEN_ELEMENTWISE_LOOP
    for (std::size_t k = 0; k < m; ++k) o[i0 + k] += e.at(s, i0 + k, k);
  });
}
/// For every leaf ℓ with a gradient: ℓ.grad[i] += dout[i]·∂e(i)/∂ℓ(i), one fused pass in chunks.
template <class T, std::size_t N, Expression E>
void backprop(const E& e, TensorView<T, N> dout) {
  detail::require(e.size() == dout.size(), "autodiff::backprop",
                  "expression has {} elements, dout {}", e.size(), dout.size());
  const T* d = dout.data;
  detail_expr::for_each_chunk(e, dout.size(), false, [&](const state_of<E>& s, std::size_t i0, std::size_t m) {
CAUSALQWEN_ELEMENTWISE_LOOP
    for (std::size_t k = 0; k < m; ++k) e.backprop_at(s, i0 + k, k, d[i0 + k]);
  });
}

}  // namespace causalqwen::autodiff
