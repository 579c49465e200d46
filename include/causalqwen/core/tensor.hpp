/// Tensors: owning xtensor containers (`Tensor<T, N>`) and non-owning row-major views
/// (`TensorView<T, N>`) of contiguous memory (an arena slice, a container, a raw buffer).
/// The rank is part of the type; the extents are checked at run time with `require_shape`.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/shape_string.hpp"
#include "causalqwen/core/xt.hpp"

#include <array>
#include <cstddef>
#include <string>

namespace causalqwen {

/// An owning row-major tensor of rank N.
template <class T, std::size_t N>
using Tensor = xt::xtensor<T, N>;

template <std::size_t N>
using Shape = std::array<std::size_t, N>;

/// A non-owning, contiguous, row-major view of rank N. `T` may be const.
template <class T, std::size_t N>
struct TensorView {
  T* data = nullptr;
  Shape<N> shape{};

  TensorView() = default;
  TensorView(T* ptr, Shape<N> extents) : data(ptr), shape(extents) {}
  /// A view of a whole xtensor container (row-major, contiguous).
  template <class U>
    requires std::is_same_v<std::remove_const_t<T>, U>
  TensorView(xt::xtensor<U, N>& t) : data(t.data()) {  // NOLINT: implicit by design
    for (std::size_t i = 0; i < N; ++i) shape[i] = t.shape()[i];
  }
  template <class U>
    requires(std::is_same_v<const U, T>)
  TensorView(const xt::xtensor<U, N>& t) : data(t.data()) {  // NOLINT
    for (std::size_t i = 0; i < N; ++i) shape[i] = t.shape()[i];
  }
  /// A mutable view converts to a read-only one.
  template <class U>
    requires(std::is_same_v<const U, T>)
  TensorView(const TensorView<U, N>& v) : data(v.data), shape(v.shape) {}  // NOLINT

  std::size_t size() const {
    std::size_t n = 1;
    for (auto e : shape) n *= e;
    return n;
  }
  bool empty() const { return data == nullptr; }
  std::size_t extent(std::size_t i) const { return shape[i]; }
  T* begin() const { return data; }
  T* end() const { return data + size(); }
  T& operator[](std::size_t i) const { return data[i]; }

  /// Row-major element access.
  template <class... I>
    requires(sizeof...(I) == N)
  T& operator()(I... idx) const {
    std::size_t flat = 0, k = 0;
    ((flat = flat * shape[k++] + static_cast<std::size_t>(idx)), ...);
    return data[flat];
  }

  /// The same memory seen with another shape of equal size.
  template <std::size_t M>
  TensorView<T, M> reshape(Shape<M> extents) const {
    TensorView<T, M> out(data, extents);
    detail::require(out.size() == size(), "TensorView::reshape", "cannot view {} as {}",
                    shape_text(shape), shape_text(extents));
    return out;
  }
  /// As a [rows, size/rows] matrix keeping the last extent: [B,S,H] → [B·S, H].
  TensorView<T, 2> flat2d() const {
    if constexpr (N == 1) return TensorView<T, 2>(data, {1, shape[0]});
    else return TensorView<T, 2>(data, {size() / shape[N - 1], shape[N - 1]});
  }
  /// An xtensor adaptor over the memory (for lazy xtensor expressions).
  auto xt() const { return xt::adapt(data, size(), xt::no_ownership(), shape); }
};

/// Throws DomainError("causalqwen::<fn>: <what> must have shape [..], got [..]") unless equal.
template <class T, std::size_t N>
void require_shape(const TensorView<T, N>& v, const Shape<N>& expected, const char* fn,
                   const char* what) {
  detail::require(v.shape == expected, fn, "{} must have shape {}, got {}", what,
                  shape_text(expected), shape_text(v.shape));
}

}  // namespace causalqwen
