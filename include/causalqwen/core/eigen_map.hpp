/// Row-major Eigen views of contiguous buffers: the bridge between xtensor storage and Eigen's
/// GEMM. A [rows, cols] row-major buffer is mapped without copying; call GEMMs on these maps
/// outside your own `omp parallel` regions (Eigen threads its GEMM itself only there).
#pragma once
#include <Eigen/Core>

#include <cstddef>

namespace causalqwen {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMatrix<T>>;  // mutable [rows, cols] view
template <class T>
using ConstMatMap = Eigen::Map<const RowMatrix<T>>;  // read-only [rows, cols] view
template <class T>
using VecMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstVecMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;

/// View `data` as a row-major [rows, cols] matrix.
template <class T>
MatMap<T> mat(T* data, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  return MatMap<T>(data, rows, cols);
}
/// View `data` as a read-only row-major [rows, cols] matrix.
template <class T>
ConstMatMap<T> mat(const T* data, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  return ConstMatMap<T>(data, rows, cols);
}

/// A row-major [rows, cols] matrix whose rows are `row_stride` elements apart (one head of a
/// [S, heads, head_dim] buffer is `strided_mat(base + h*head_dim, S, head_dim, heads*head_dim)`).
template <class T>
using StridedMatMap = Eigen::Map<RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstStridedMatMap = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class T>
StridedMatMap<T> strided_mat(T* data, std::ptrdiff_t rows, std::ptrdiff_t cols,
                             std::ptrdiff_t row_stride) {
  return StridedMatMap<T>(data, rows, cols, Eigen::OuterStride<>(row_stride));
}
template <class T>
ConstStridedMatMap<T> strided_mat(const T* data, std::ptrdiff_t rows, std::ptrdiff_t cols,
                                  std::ptrdiff_t row_stride) {
  return ConstStridedMatMap<T>(data, rows, cols, Eigen::OuterStride<>(row_stride));
}

}  // namespace causalqwen
