/// CauchyView<T, Rank, Kind>: a zero-copy view of a tensor of Cauchy variables whose loc and
/// scale live elsewhere (an arena slot, a layer's cache, a chunk buffer). The model's layers pass
/// these between each other, so the algebra of kind_rules.hpp is checked inside the model:
/// the abduction network yields an independent view U, the action's linear maps yield marginal
/// views S and Y, and an operation that would leave the Cauchy family does not compile.
///
/// Only the algebra gives a view its kind: the abduction network (the source of independent
/// individuals), and an operation of the rules applied to a typed input (`result_view`: a linear
/// map yields marginal, added noise, an affine map or a subset of components keep the input's
/// kind). Writing `CauchyView<T, 2, Kind::independent>{loc, scale}` does not compile; a test, an
/// experiment or a benchmark that owns the claim writes `assume_cauchy_view<Kind::independent>(loc, scale)`.
/// An operation that writes into caller buffers takes a kind-less `CauchyOut` and returns the
/// typed view over it.
///
///   CauchyOut<float, 2> out{loc_S, scale_S};                      // [M,N] each, no kind yet
///   auto S = result_view(ops::linear{}, U, out);                  // marginal, from U independent
///   S.loc(m, n), S.scale(m, n), S.median(), row_of(S, m)
///
/// `T` may be const (a read-only view); a mutable view converts to a read-only one of the same
/// kind. The kind never changes by conversion: only an operation of the algebra makes a new one.
/// The operations themselves (linear, affine, add_noise, …) are in operations.hpp; an owning
/// CauchyTensor (cauchy_tensor.hpp) shows its storage as a view of its own kind.
#pragma once
#include <causalqwen/cauchy/kind_rules.hpp>
#include <causalqwen/cauchy/special.hpp>
#include <causalqwen/core/tensor.hpp>

#include <cstddef>
#include <type_traits>

namespace causalqwen {

template <class T, std::size_t Rank, Kind K>
struct CauchyView;

/// Where an operation writes a tensor of Cauchy variables before it has a kind: loc and scale
/// buffers of the same shape. The operation returns the typed view over them.
template <class T, std::size_t Rank>
struct CauchyOut {
  TensorView<T, Rank> loc;    // location per component, written by the operation
  TensorView<T, Rank> scale;  // scale per component, written by the operation
};

namespace model {
template <class T>
struct Abduction;  // the source of independent individuals (model/abduction.hpp)
}

template <Real T, std::size_t Rank, Kind K>
class CauchyTensor;  // the owning form (cauchy_tensor.hpp)

template <Kind K, class T, std::size_t Rank>
CauchyView<T, Rank, K> assume_cauchy_view(TensorView<T, Rank> loc, TensorView<T, Rank> scale);
template <class Op, class U, std::size_t RIn, Kind K, class T, std::size_t Rank>
CauchyView<T, Rank, result_kind<Op>(K)> result_view(Op, const CauchyView<U, RIn, K>& input, CauchyOut<T, Rank> out);
template <class U1, class U2, std::size_t R, Kind K1, Kind K2, class T>
CauchyView<T, R, sum_kind(K1, K2)> result_view(ops::sum_independent, const CauchyView<U1, R, K1>& x,
                                               const CauchyView<U2, R, K2>& y, CauchyOut<T, R> out);

/// The right to declare the kind of a new view: held by the abduction network, by result_view
/// (which takes the kind from the rules), by a CauchyTensor (a view of its own storage, of its
/// own kind) and by the named escape assume_cauchy_view.
class KindKey {
  KindKey() = default;
  template <class>
  friend struct model::Abduction;
  template <Real T, std::size_t Rank, Kind K>
  friend class CauchyTensor;
  template <Kind K, class T, std::size_t Rank>
  friend CauchyView<T, Rank, K> assume_cauchy_view(TensorView<T, Rank>, TensorView<T, Rank>);
  template <class Op, class U, std::size_t RIn, Kind K, class T, std::size_t Rank>
  friend CauchyView<T, Rank, result_kind<Op>(K)> result_view(Op, const CauchyView<U, RIn, K>&, CauchyOut<T, Rank>);
  template <class U1, class U2, std::size_t R, Kind K1, Kind K2, class T>
  friend CauchyView<T, R, sum_kind(K1, K2)> result_view(ops::sum_independent, const CauchyView<U1, R, K1>&,
                                                        const CauchyView<U2, R, K2>&, CauchyOut<T, R>);
};

template <class T, std::size_t Rank, Kind K>
struct CauchyView {
  using value_type = std::remove_const_t<T>;
  static constexpr std::size_t rank = Rank;
  static constexpr Kind kind = K;

  const TensorView<T, Rank> loc;    // location (= median) per component
  const TensorView<T, Rank> scale;  // scale > 0 per component

  /// Declares loc and scale (same shape) to be the parameters of Cauchy variables of kind K;
  /// only the holders of a KindKey can.
  CauchyView(KindKey, TensorView<T, Rank> loc_view, TensorView<T, Rank> scale_view) : loc(loc_view), scale(scale_view) {
    detail::require(loc_view.shape == scale_view.shape, "CauchyView", "loc {} and scale {} must have the same shape",
                    shape_text(loc_view.shape), shape_text(scale_view.shape));
  }
  /// A kind declared by ordinary code: refused with the sentence CAUSALQWEN_KIND_OUTSIDE_ALGEBRA.
  template <class D = void>
  CauchyView(TensorView<T, Rank>, TensorView<T, Rank>) {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_KIND_OUTSIDE_ALGEBRA);
  }
  /// A mutable view converts to a read-only one of the same kind.
  template <class U>
    requires(std::is_same_v<const U, T>)
  CauchyView(const CauchyView<U, Rank, K>& v) : loc(v.loc), scale(v.scale) {}  // NOLINT: implicit by design

  const Shape<Rank>& shape() const { return loc.shape; }
  std::size_t size() const { return loc.size(); }
  /// The median of every component (= loc). A Cauchy variable has a median but no mean.
  TensorView<T, Rank> median() const { return loc; }

  template <class D = void>
  void mean() const {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_NO_MEAN);
  }
  template <class D = void>
  void variance() const {
    static_assert(detail::always_false_v<D>, CAUSALQWEN_NO_VARIANCE);
  }
};

template <class T, std::size_t R, Kind K>
struct cauchy_traits<CauchyView<T, R, K>> {
  static constexpr bool is_cauchy = true;
  static constexpr Kind kind = K;
};

/// `out` seen as what the operation Op of the algebra wrote into it from `input`: kind
/// result_kind<Op>(K) (linear → marginal, any other closed operation keeps K). Op must be closed
/// for the input's kind: a linear map of a marginal input, or exp, relu, … do not compile (one
/// sentence each).
template <class Op, class U, std::size_t RIn, Kind K, class T, std::size_t Rank>
CauchyView<T, Rank, result_kind<Op>(K)> result_view(Op, const CauchyView<U, RIn, K>&, CauchyOut<T, Rank> out) {
  static_assert(!std::is_same_v<Op, ops::linear> || K == Kind::independent, CAUSALQWEN_LINEAR_OF_MARGINAL);
  static_assert(std::is_same_v<Op, ops::linear> || closed_under_v<Op, CauchyView<U, RIn, K>>, CAUSALQWEN_NOT_CLOSED);
  return {KindKey{}, out.loc, out.scale};
}

/// `out` seen as the sum x + y of two views declared independent of each other (loc + loc,
/// scale + scale): independent only when both are, otherwise marginal (sum_kind).
template <class U1, class U2, std::size_t R, Kind K1, Kind K2, class T>
CauchyView<T, R, sum_kind(K1, K2)> result_view(ops::sum_independent, const CauchyView<U1, R, K1>&,
                                               const CauchyView<U2, R, K2>&, CauchyOut<T, R> out) {
  return {KindKey{}, out.loc, out.scale};
}

/// Row m of a view [M,N] (one position's N components), of the same kind:
///   row_of(X, m).loc[j] = X.loc(m, j),  row_of(X, m).scale[j] = X.scale(m, j).
template <class T, Kind K>
CauchyView<T, 1, K> row_of(const CauchyView<T, 2, K>& x, std::size_t m) {
  const std::size_t n = x.loc.shape[1];
  detail::require(m < x.loc.shape[0], "row_of", "row {} of a view of {} rows", m, x.loc.shape[0]);
  return result_view(ops::select{}, x, CauchyOut<T, 1>{{x.loc.data + m * n, {n}}, {x.scale.data + m * n, {n}}});
}

/// The escape for tests, experiments and benchmarks: the caller asserts that loc and scale are
/// the parameters of Cauchy variables of kind K (for independent, that the components are
/// mutually independent). Nothing checks the claim; the rules then apply to the view as to any
/// other (a view assumed marginal still cannot go through a linear map).
template <Kind K, class T, std::size_t Rank>
CauchyView<T, Rank, K> assume_cauchy_view(TensorView<T, Rank> loc, TensorView<T, Rank> scale) {
  return {KindKey{}, loc, scale};
}

/// One Cauchy variable's parameters (a single variable has no dependence structure, so no kind).
template <class T>
struct CauchyParams {
  T loc, scale;
};

/// The gradient of a loss with respect to the parameters of a Cauchy tensor: plain numbers,
/// ∂L/∂loc and ∂L/∂scale per component (not Cauchy variables themselves).
template <class T, std::size_t Rank>
struct CauchyViewGrad {
  TensorView<T, Rank> d_loc;    // ∂L/∂loc
  TensorView<T, Rank> d_scale;  // ∂L/∂scale

  CauchyViewGrad() = default;
  CauchyViewGrad(TensorView<T, Rank> loc_grad, TensorView<T, Rank> scale_grad) : d_loc(loc_grad), d_scale(scale_grad) {}
  /// A mutable gradient view converts to a read-only one.
  template <class U>
    requires(std::is_same_v<const U, T>)
  CauchyViewGrad(const CauchyViewGrad<U, Rank>& g) : d_loc(g.d_loc), d_scale(g.d_scale) {}  // NOLINT: implicit by design
};

}  // namespace causalqwen
