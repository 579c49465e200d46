/// The one handle a product takes for one weight matrix W [N,C]: its float values and the other
/// forms that exist for it, with the arithmetic the products run in.
///   values     W itself, a view of the parameter arena (float or double)
///   decode     a bf16 or int8 copy for decoding (packed_weight.hpp: PackedMatrix), read in f32
///              products: by the few-rows kernels (gemv.hpp, int8_dot.hpp) and, for a bf16 copy,
///              by every row count (bf16_gemm.hpp); many rows with an int8 copy run on the bf16
///              kernels or on the float GEMM over `values`, which then hold q·s
///   bf16_copy  bf16(W) kept current between the steps of mixed-precision training
///              (bf16_copies.hpp), read only by Format::bf16 products (for W, and for |W|
///              with the sign bits cleared) instead of rounding `values` at every use
///   abs        |W| (weight_store.hpp: WeightStore::abs), read by the scale products of the Cauchy
///              linear map beyond its fused rows, unless the bf16 copy stands in for it
///   precision  f32: float products; bf16: bf16 operands with float sums (mixed precision)
/// A Weight owns none of them: the model keeps the arena and a WeightStore (the bf16 and packed
/// copies, |W|), and hands out Weights; a form it does not hand out is absent (type f32, or an
/// empty view), and the products then read `values`.
#pragma once
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/format.hpp"

#include <cstddef>
#include <type_traits>

namespace causalqwen::linalg {

/// The forms of a weight matrix besides its values: what a model fills in once per matrix
/// (see the file comment for who reads which).
struct WeightForms {
  PackedRef decode{};     // bf16 / int8 copy for decoding (type f32: none)
  PackedRef bf16_copy{};  // current bf16(W) of mixed-precision training (type f32: none)
  Format precision = Format::f32;
};

/// W [N,C] with its forms (file comment). T is the element type, const-qualified for a
/// read-only handle: a layer's parameters and gradients share one struct (Weight<T>), the
/// products take Weight<const T>.
template <class T>
struct Weight : WeightForms {
  using value_type = std::remove_const_t<T>;
  TensorView<T, 2> values{};             // W [N,C]
  TensorView<const value_type, 2> abs{};  // |W| [N,C] (empty: not at hand)

  Weight() = default;
  /// W alone: float products over its values.
  template <class U>
    requires std::is_convertible_v<U*, T*>
  Weight(TensorView<U, 2> w) : values(w) {}  // NOLINT: a plain matrix is a Weight without other forms
  /// The read-only handle of a writable one.
  template <class U>
    requires(std::is_const_v<T> && std::is_same_v<const U, T> && !std::is_const_v<U>)
  Weight(const Weight<U>& w) : WeightForms(w), values(w.values), abs(w.abs) {}  // NOLINT

  const Shape<2>& shape() const { return values.shape; }
  /// The forms besides the values.
  const WeightForms& forms() const { return *this; }
  /// Replaces the forms besides the values (the matrix and |W| stay).
  Weight& use_forms(const WeightForms& f) {
    static_cast<WeightForms&>(*this) = f;
    return *this;
  }
  /// The same handle with |W| = `abs_w` [N,C].
  Weight with_abs(TensorView<const value_type, 2> abs_w) const {
    Weight w = *this;
    w.abs = abs_w;
    return w;
  }
  /// The same handle with the decoding copy `copy`.
  Weight with_decode(const PackedRef& copy) const {
    Weight w = *this;
    w.decode = copy;
    return w;
  }
  /// The same handle with the bf16 training copy `copy`.
  Weight with_bf16_copy(const PackedRef& copy) const {
    Weight w = *this;
    w.bf16_copy = copy;
    return w;
  }
  /// The same handle with products in `p` (f32 or bf16; int8 is refused: a storage format only).
  Weight with_precision(Format p) const {
    require_product_format(p, "Weight::with_precision");
    Weight w = *this;
    w.precision = p;
    return w;
  }

  /// The copy a product of X·Wᵀ reads for W:  Format::bf16 → bf16_copy, f32 → decode.
  const PackedRef& product_copy() const { return precision == Format::bf16 ? bf16_copy : decode; }
  /// The copy a product of dY·W reads for W: bf16_copy under Format::bf16, none in f32.
  PackedRef backward_copy() const { return precision == Format::bf16 ? bf16_copy : PackedRef{}; }

  /// |W| as a Weight for the scale products: values |W| (`abs`'s data, W's shape: not read
  /// when the bf16 copy stands in), the bf16 copy read as |W|, no decoding copy.
  Weight<const value_type> abs_weight() const {
    Weight<const value_type> a;
    a.values = TensorView<const value_type, 2>(abs.data, values.shape);
    a.bf16_copy = bf16_copy.abs_values();
    a.precision = precision;
    return a;
  }
  /// Whether the scale products of Format::bf16 read |W| from the bf16 copy (abs not needed).
  bool abs_from_copy() const { return precision == Format::bf16 && bf16_copy.packed(); }

  /// Rows [r0, r0 + n) of W: its values and |W| (when at hand), the decoding copy's same rows,
  /// and the bf16 copy's only from a multiple of panel_rows on (where its products can start
  /// reading it; elsewhere they round the values instead).
  Weight rows(std::size_t r0, std::size_t n) const {
    Weight w = *this;
    const std::size_t C = values.shape[1];
    w.values = TensorView<T, 2>(values.data + r0 * C, {n, C});
    w.abs = abs.empty() ? TensorView<const value_type, 2>{} : TensorView<const value_type, 2>(abs.data + r0 * C, {n, C});
    w.decode = decode.packed() ? decode.rows_from(r0, n) : PackedRef{};
    w.bf16_copy = bf16_copy.packed() && r0 % panel_rows == 0 ? bf16_copy.rows_from(r0, n) : PackedRef{};
    return w;
  }
};

}  // namespace causalqwen::linalg
