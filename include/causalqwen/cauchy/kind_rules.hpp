/// The algebra of Cauchy tensors as types, shared by the owning `CauchyTensor` and the zero-copy
/// `CauchyView`: which operations keep a tensor of Cauchy variables Cauchy, and one sentence from
/// the compiler for each operation that does not.
///
///   Kind::independent — components mutually independent (what the abduction network yields);
///   Kind::marginal    — each component exactly Cauchy, jointly dependent (what a linear map of
///                       independent components yields).
///
/// Closed for both kinds: per-component affine maps (loc·a + c, scale·|a|), negation, adding
/// independent Cauchy noise (scale + |b|), the sum with a tensor declared independent, a subset
/// of the components.
/// Closed for independent tensors only: a linear map (loc' = W·loc + b, scale' = |W|·scale).
/// For a marginal tensor |W₂|·|W₁|·γ only bounds the true scale |W₂W₁|·γ.
/// Refused: exp, log, tanh, silu, softmax, relu, abs, the product or quotient of two Cauchy
/// tensors, mean and variance. `closed_under_v<Op, X>` asks the same question without an error.
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

namespace causalqwen {

/// The dependence structure of a Cauchy tensor's components.
enum class Kind { independent, marginal };

/// Operation tags for closed_under_v.
namespace ops {
struct linear {};           // linear(W, b, X)
struct affine {};           // a ⊙ X + c, X * s, X / s, X + s
struct negate {};           // −X
struct add_noise {};        // X + |b|·ε, ε independent standard Cauchy
struct sum_independent {};  // X + assume_independent(Y)
struct select {};           // a subset of X's components (rows, one position)
struct exp {};
struct log {};
struct tanh {};
struct silu {};
struct softmax {};
struct relu {};
struct abs {};
struct product {};   // X * Y of two Cauchy tensors
struct quotient {};  // X / Y of two Cauchy tensors
struct mean {};
struct variance {};
}  // namespace ops

/// What a Cauchy type is: specialised by CauchyTensor and CauchyView (`is_cauchy` true, `kind`).
template <class X>
struct cauchy_traits {
  static constexpr bool is_cauchy = false;
};
template <class X>
inline constexpr bool is_cauchy_v = cauchy_traits<std::remove_cvref_t<X>>::is_cauchy;
/// A tensor of Cauchy variables (owning or a view).
template <class X>
concept CauchyLike = is_cauchy_v<X>;
template <CauchyLike X>
inline constexpr Kind kind_of_v = cauchy_traits<std::remove_cvref_t<X>>::kind;

/// Whether applying Op to X yields a Cauchy tensor again (exactly, not as a bound).
template <class Op, class X>
struct closed_under : std::false_type {};
template <class Op, CauchyLike X>
struct closed_under<Op, X>
    : std::bool_constant<std::is_same_v<Op, ops::affine> || std::is_same_v<Op, ops::negate> ||
                         std::is_same_v<Op, ops::add_noise> || std::is_same_v<Op, ops::sum_independent> ||
                         std::is_same_v<Op, ops::select> ||
                         (std::is_same_v<Op, ops::linear> && kind_of_v<X> == Kind::independent)> {};
template <class Op, class X>
inline constexpr bool closed_under_v = closed_under<Op, std::remove_cvref_t<X>>::value;

/// The kind of what a closed operation Op yields from a tensor of kind k: a linear map mixes the
/// components (marginal); every other closed operation acts per component and keeps k.
template <class Op>
constexpr Kind result_kind(Kind k) {
  return std::is_same_v<Op, ops::linear> ? Kind::marginal : k;
}

/// The kind of the sum of two independent Cauchy tensors: independent only when both are.
constexpr Kind sum_kind(Kind a, Kind b) {
  return a == Kind::independent && b == Kind::independent ? Kind::independent : Kind::marginal;
}

namespace detail {
template <class...>
inline constexpr bool always_false_v = false;

/// A shape with its last extent replaced.
template <std::size_t R>
std::array<std::size_t, R> with_last(std::array<std::size_t, R> shape, std::size_t last) {
  shape[R - 1] = last;
  return shape;
}
}  // namespace detail

// The sentences of the refused operations (string literals, as static_assert needs).
#define CAUSALQWEN_LINEAR_OF_MARGINAL                                                                         \
  "causalqwen::linear: a marginal Cauchy tensor has dependent components, so |W| would only bound its scale; " \
  "fuse the weights first with causalqwen::fuse_linear(W2, b2, W1, b1) and apply one linear map to the "       \
  "independent tensor."
#define CAUSALQWEN_NOT_CLOSED \
  "causalqwen: this operation does not keep a Cauchy tensor Cauchy, so its result has no kind (see kind_rules.hpp)."
#define CAUSALQWEN_KIND_OUTSIDE_ALGEBRA                                                                            \
  "causalqwen: a CauchyView's kind comes from the algebra (the abduction network yields independent, a linear map " \
  "marginal, added noise keeps the kind); write causalqwen::assume_cauchy_view<Kind::...>(loc, scale) to assert " \
  "a kind yourself."
#define CAUSALQWEN_TENSOR_KIND_OUTSIDE_ALGEBRA                                                                 \
  "causalqwen: a CauchyTensor's kind comes from the algebra (a copy of a typed CauchyView, or the result of an " \
  "operation); write causalqwen::assume_cauchy_tensor<Kind::...>(loc, scale) to assert a kind yourself."
#define CAUSALQWEN_NO_MEAN "causalqwen: a Cauchy distribution has no mean; use median() (= loc) or quantile()."
#define CAUSALQWEN_NO_VARIANCE \
  "causalqwen: a Cauchy distribution has no variance; use scale() or an interquartile range from quantile()."

// Poisoned overloads: found by ADL for unqualified calls on any Cauchy type (and by causalqwen::
// calls), each prints one sentence through static_assert.
#define CAUSALQWEN_REFUSE_UNARY(fn, sentence)                 \
  template <CauchyLike X>                                     \
  X fn(const X& x) {                                          \
    static_assert(closed_under_v<ops::fn, X>, sentence);      \
    return x;                                                 \
  }
CAUSALQWEN_REFUSE_UNARY(exp, "causalqwen: exp of a Cauchy tensor is not Cauchy (it is log-Cauchy); only affine and linear maps keep a Cauchy tensor Cauchy, so transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(log, "causalqwen: log of a Cauchy tensor is not Cauchy (and undefined where the variable is negative); transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(tanh, "causalqwen: tanh of a Cauchy tensor is not Cauchy; only affine and linear maps keep a Cauchy tensor Cauchy, so transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(silu, "causalqwen: silu of a Cauchy tensor is not Cauchy; apply nonlinearities before the abduction network, not to its Cauchy output.")
CAUSALQWEN_REFUSE_UNARY(softmax, "causalqwen: softmax of Cauchy tensors is not Cauchy; use ovr_prob() for class probabilities, or softmax over loc (the compatible mode).")
CAUSALQWEN_REFUSE_UNARY(relu, "causalqwen: relu of a Cauchy tensor is not Cauchy (it has an atom at 0); transform samples or quantiles instead.")
CAUSALQWEN_REFUSE_UNARY(abs, "causalqwen: abs of a Cauchy tensor is half-Cauchy, not Cauchy; transform samples or quantiles instead.")
#undef CAUSALQWEN_REFUSE_UNARY

template <CauchyLike X, CauchyLike Y>
X operator*(const X& x, const Y&) {
  static_assert(closed_under_v<ops::product, X>,
                "causalqwen: the product of two Cauchy tensors is not Cauchy; multiply by a constant or a weight matrix instead.");
  return x;
}
template <CauchyLike X, CauchyLike Y>
X operator/(const X& x, const Y&) {
  static_assert(closed_under_v<ops::quotient, X>,
                "causalqwen: the quotient of two Cauchy tensors is not Cauchy; divide by a non-zero constant instead.");
  return x;
}
template <CauchyLike X, CauchyLike Y>
X operator+(const X& x, const Y&) {
  static_assert(detail::always_false_v<X>,
                "causalqwen: the sum of two Cauchy tensors is Cauchy only if they are independent of each other, which their types cannot show; write X + causalqwen::assume_independent(Y).");
  return x;
}

/// mean(X) and variance(X) as free functions are refused like the members.
template <CauchyLike X>
void mean(const X&) {
  static_assert(detail::always_false_v<X>, CAUSALQWEN_NO_MEAN);
}
template <CauchyLike X>
void variance(const X&) {
  static_assert(detail::always_false_v<X>, CAUSALQWEN_NO_VARIANCE);
}

}  // namespace causalqwen
