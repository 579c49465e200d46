/// CauchyView<T, Rank, Kind>: a zero-copy view of a tensor of Cauchy variables whose loc and
/// scale live elsewhere (an arena slot, a layer's cache, a chunk buffer). The model's layers pass
/// these between each other, so the algebra of kind_rules.hpp is checked inside the model:
/// the abduction network yields an independent view U, the action's linear maps yield marginal
/// views S and Y, and an operation that would leave the Cauchy family does not compile.
///
///   CauchyView<const float, 2, Kind::independent> U{loc_U, scale_U};   // [M,C] each
///   U.loc(m, j), U.scale(m, j), U.median()
///
/// `T` may be const (a read-only view); a mutable view converts to a read-only one of the same
/// kind. The kind never changes by conversion: only an operation of the algebra makes a new one.
#pragma once
#include <causalqwen/cauchy/kind_rules.hpp>
#include <causalqwen/core/tensor.hpp>

#include <cstddef>
#include <type_traits>

namespace causalqwen {

template <class T, std::size_t Rank, Kind K>
struct CauchyView {
  using value_type = std::remove_const_t<T>;
  static constexpr std::size_t rank = Rank;
  static constexpr Kind kind = K;

  TensorView<T, Rank> loc;    // location (= median) per component
  TensorView<T, Rank> scale;  // scale > 0 per component

  CauchyView() = default;
  /// Declares loc and scale (same shape) to be the parameters of Cauchy variables of kind K.
  CauchyView(TensorView<T, Rank> loc_view, TensorView<T, Rank> scale_view) : loc(loc_view), scale(scale_view) {
    detail::require(loc_view.shape == scale_view.shape, "CauchyView", "loc {} and scale {} must have the same shape",
                    shape_text(loc_view.shape), shape_text(scale_view.shape));
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
