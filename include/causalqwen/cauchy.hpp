/// The Cauchy math on its own: `#include <causalqwen/cauchy.hpp>`.
///
///   special.hpp        softplus, inv_softplus, log_softplus, stable building blocks
///   distribution.hpp   pdf, log_pdf, cdf, log_cdf, sf, log_sf, quantile, sample, nll (+ *_grad)
///   ovr.hpp            ovr_prob, ovr_log_prob, ovr_log_1m_prob, ovr_bce, ovr_bce_eps (+ *_grad)
///   ovr_row.hpp        the vectorised row kernels ovr_bce_row and ovr_prob_row
///   kind_rules.hpp     Kind (independent, marginal), closed_under_v, the refused operations
///   cauchy_view.hpp    CauchyView<T, Rank, Kind> (zero-copy, what the model's layers pass), its
///                      kinds from the algebra only: CauchyOut, result_view, row_of, and the escape
///                      assume_cauchy_view
///   operations.hpp     the closed operations, once, over views: linear, affine, times, divide,
///                      shift, negate, add_noise, sum_independent (with assume_independent)
///   linear_map.hpp     LinearMap and fuse_linear (two linear maps as one)
///   cauchy_tensor.hpp  CauchyTensor<T, Rank, Kind>, the owning form: view(), the operations as
///                      functions and operators on tensors, and the escape assume_cauchy_tensor
///   shift_to_draw.hpp  shift_to_draw: a tensor shifted onto a draw of each component, of its kind
#pragma once
#include <causalqwen/version.hpp>
#include <causalqwen/cauchy/special.hpp>
#include <causalqwen/cauchy/distribution.hpp>
#include <causalqwen/cauchy/ovr.hpp>
#include <causalqwen/cauchy/ovr_row.hpp>
#include <causalqwen/cauchy/cauchy_view.hpp>
#include <causalqwen/cauchy/operations.hpp>
#include <causalqwen/cauchy/linear_map.hpp>
#include <causalqwen/cauchy/cauchy_tensor.hpp>
#include <causalqwen/cauchy/shift_to_draw.hpp>
