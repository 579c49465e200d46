/// A draw of every component of a Cauchy tensor, carried as the tensor shifted onto the draw:
///
///   X' = shift_to_draw(X, u, loc_out):  loc'_i = loc_i + scale_i·tan(π(u_i − ½)),  scale'_i = scale_i
///
/// with one uniform u_i ∈ (0,1) per component. Once u is drawn, loc' − loc is a constant per
/// component, so X' is X shifted by constants (ops::affine): the rules give it X's kind, and a
/// linear map of an independent X' stays exact. loc' is the draw itself, scale' X's own spread.
/// The causal mode of generation draws its individual from U this way.
#pragma once
#include <causalqwen/cauchy/cauchy_view.hpp>
#include <causalqwen/cauchy/distribution.hpp>
#include <causalqwen/core/tensor.hpp>

#include <cstddef>

namespace causalqwen {

/// X' = X shifted onto a draw: loc_out_i = loc_i + scale_i·tan(π(u_i − ½)) (written), scale' = X's
/// scale (viewed); u and loc_out have X's shape. The kind is X's (result_kind of ops::affine).
template <class T, std::size_t Rank, Kind K>
CauchyView<const T, Rank, K> shift_to_draw(const CauchyView<const T, Rank, K>& x, TensorView<const T, Rank> u,
                                           TensorView<T, Rank> loc_out) {
  require_shape(u, x.loc.shape, "shift_to_draw", "the uniforms");
  require_shape(loc_out, x.loc.shape, "shift_to_draw", "loc of the draw");
  const std::size_t n = x.loc.size();
  for (std::size_t i = 0; i < n; ++i) loc_out.data[i] = raw::quantile(u.data[i], x.loc.data[i], x.scale.data[i]);
  return result_view(ops::affine{}, x, CauchyOut<const T, Rank>{loc_out, x.scale});
}

}  // namespace causalqwen
