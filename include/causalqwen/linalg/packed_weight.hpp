/// Weight matrices stored for inference in a narrower type than float, read by the few-rows
/// kernels of decoding (gemv.hpp), which are bound by the bytes of W they read per token:
///   f32    4 bytes per weight (the matrix itself)
///   bf16   2 bytes:  w_ij = bf16(W_ij), round to nearest even
///   int8   1 byte (+ 4 per row):  w_ij = q_ij·s_i,  s_i = max_j |W_ij| / 127,
///          q_ij = round(W_ij / s_i) ∈ [−127, 127]  (symmetric, one scale per row)
/// `round_weights` writes the same values back into the float matrix, so that a GEMM over the
/// float copy (evaluation; int8 prefill on a CPU without AVX512-BF16) computes with the numbers
/// the packed kernels read.
/// The bf16 kernels widen every weight to float (or multiply bf16 pairs) and accumulate in
/// float; the int8 kernels (int8_dot.hpp) quantise the input per chunk of 16 and sum integer
/// products, then multiply each row's sum by s_i once at the end; many rows with an int8 copy
/// may run on the bf16 kernels instead, q widened to bf16 (bf16_gemm.hpp).
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

namespace causalqwen::linalg {

/// Bytes one weight takes in a matrix of `cols` columns (int8 counts its row scale).
inline double bytes_per_weight(Format t, std::size_t cols) {
  switch (t) {
    case Format::bf16: return 2.0;
    case Format::int8: return 1.0 + 4.0 / static_cast<double>(std::max<std::size_t>(cols, 1));
    case Format::f32: break;
  }
  return 4.0;
}

/// Packed copies are stored in panels, so that the kernels, which read four rows side by side,
/// read one sequential stream (which reads faster than four row-major streams side by side): rows
/// in groups of 4 (the last group padded with zero rows), columns in chunks of 16 (the last chunk
/// padded with zeros), the 4×16 block of a group and chunk contiguous:
///   w_rc at  (r / 4)·4·cols_padded + (c / 16)·64 + (r % 4)·16 + c % 16
inline constexpr std::size_t panel_rows = 4, panel_cols = 16;

/// A row length of `cols` values rounded up to whole chunks of 16: a panel store's cols_padded.
constexpr std::size_t panel_padded_cols(std::size_t cols) noexcept { return (cols + panel_cols - 1) / panel_cols * panel_cols; }
/// Values in a panel store of `rows` rows (rounded up to whole groups of 4) of cols_padded each.
constexpr std::size_t panel_store_size(std::size_t rows, std::size_t cols_padded) noexcept {
  return (rows + panel_rows - 1) / panel_rows * panel_rows * cols_padded;
}

/// Index of w_rc in a panel store of `cols_padded` (a multiple of 16) columns.
constexpr std::size_t panel_index(std::size_t r, std::size_t c, std::size_t cols_padded) noexcept {
  return (r / panel_rows) * panel_rows * cols_padded + (c / panel_cols) * (panel_rows * panel_cols) +
         (r % panel_rows) * panel_cols + c % panel_cols;
}

/// A copy of a whole packed matrix in another library's layout (oneDNN's blocked weights:
/// kernels/onednn_bf16.hpp), made on first use by whichever thread asks first (the others wait)
/// and kept beside the matrix until it is destroyed.
struct LazyCopy {
  std::once_flag made[2];
  std::shared_ptr<const void> value[2];  // the copies (slot 0: bf16 values, 1: int8), of the type their maker chose
};

/// A packed matrix W [rows, cols] seen by the kernels (no ownership): rows [row0, row0 + rows)
/// of the panel store. type f32 = not packed: the kernels read the float matrix.
struct PackedRef {
  Format type = Format::f32;
  std::size_t rows = 0, cols = 0;
  std::size_t cols_padded = 0;          // cols rounded up to a multiple of 16
  std::size_t row0 = 0;                 // the first row, in the store
  const std::uint16_t* bf16 = nullptr;  // panels (see panel_index)
  const std::int8_t* q = nullptr;       // panels
  const float* row_scale = nullptr;     // [rows of the store], int8 only
  bool abs = false;                     // bf16: the products read |W|, the values with their sign bits cleared
  LazyCopy* lazy = nullptr;             // the whole matrix in oneDNN's layout, made on first use (PackedMatrix's)
  std::size_t store_rows = 0;           // rows of the whole matrix that `lazy` copies
  bool rows_layout = false;             // bf16: rows stored one after another, cols_padded apart, not in panels

  bool packed() const { return type != Format::f32; }
  /// The same copy read as |W| (bf16(|w|) = |bf16(w)|: the sign bit cleared); none stays none.
  PackedRef abs_values() const {
    PackedRef r = *this;
    r.abs = type == Format::bf16;
    return r;
  }
  /// Rows [r0, r0 + n) of the matrix.
  PackedRef rows_from(std::size_t r0, std::size_t n) const {
    PackedRef r = *this;
    r.row0 += r0;
    r.rows = n;
    return r;
  }
};

namespace detail_packed {

/// s_i = max_j |W_ij| / 127, at least the smallest subnormal (a row of tiny weights); 1 for an
/// all-zero row (q = 0 stays exact) or a row holding ±∞ or NaN.
inline float int8_row_scale(const float* row, std::size_t cols) {
  float m = 0;
  for (std::size_t j = 0; j < cols; ++j) m = std::max(m, std::fabs(row[j]));
  if (!(m > 0) || !std::isfinite(m)) return 1.0f;
  return std::max(m / 127.0f, std::numeric_limits<float>::denorm_min());
}
inline std::int8_t int8_of(float w, float s) {
  const float r = std::nearbyint(w / s);
  return static_cast<std::int8_t>(std::clamp(std::isnan(r) ? 0.0f : r, -127.0f, 127.0f));
}

}  // namespace detail_packed

/// W [rows, cols] stored as `type` (owning), in panels: the packed copy a model keeps for decoding.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  /// Packs the float matrix w [rows, cols] (see the file comment for the rules), into a buffer on
  /// huge pages when it is large (core/page_buffer.hpp: decoding streams it once per token).
  PackedMatrix(Format type, TensorView<const float, 2> w)
      : type_(type), rows_(w.shape[0]), cols_(w.shape[1]), cols_padded_(panel_padded_cols(cols_)),
        lazy_(type == Format::f32 ? nullptr : std::make_unique<LazyCopy>()) {
    const std::size_t n = panel_store_size(rows_, cols_padded_);
    if (type == Format::bf16) {
      bf16_ = PageBuffer<std::uint16_t>(n);
      parallel_for(rows_, rows_ * cols_, [&](std::size_t r) {
        for (std::size_t c = 0; c < cols_; ++c) bf16_[panel_index(r, c, cols_padded_)] = float_to_bf16(w.data[r * cols_ + c]);
      });
    } else if (type == Format::int8) {
      q_ = PageBuffer<std::int8_t>(n);
      scale_ = PageBuffer<float>(rows_);
      parallel_for(rows_, rows_ * cols_, [&](std::size_t r) {
        const float* row = w.data + r * cols_;
        const float s = scale_[r] = detail_packed::int8_row_scale(row, cols_);
        for (std::size_t c = 0; c < cols_; ++c) q_[panel_index(r, c, cols_padded_)] = detail_packed::int8_of(row[c], s);
      });
    }
  }
  PackedRef ref() const {
    return {type_, rows_, cols_, cols_padded_, 0, bf16_.data(), q_.data(), scale_.data(), false, lazy_.get(), rows_, false};
  }
  Format type() const { return type_; }
  /// Bytes of storage (the panels' padding included).
  std::size_t bytes() const { return bf16_.size() * 2 + q_.size() + scale_.size() * 4; }
  /// The float value of w_ij as the kernels read it (q_ij·s_i for int8).
  float at(std::size_t i, std::size_t j) const {
    const std::size_t k = panel_index(i, j, cols_padded_);
    if (type_ == Format::bf16) return bf16_to_float(bf16_[k]);
    return static_cast<float>(q_[k]) * scale_[i];
  }

 private:
  Format type_ = Format::f32;
  std::size_t rows_ = 0, cols_ = 0, cols_padded_ = 0;
  PageBuffer<std::uint16_t> bf16_;
  PageBuffer<std::int8_t> q_;
  PageBuffer<float> scale_;
  std::unique_ptr<LazyCopy> lazy_;  // prefill's copy in oneDNN's layout (kernels/onednn_bf16.hpp), when made
};

/// W ← the values a `type` copy of W holds (bf16(W), or q·s per row for int8), in place; f32
/// leaves W as it is.
inline void round_weights(Format type, TensorView<float, 2> w) {
  const std::size_t rows = w.shape[0], cols = w.shape[1];
  if (type == Format::bf16) {
    for (std::size_t i = 0; i < rows * cols; ++i) w.data[i] = bf16_to_float(float_to_bf16(w.data[i]));
  } else if (type == Format::int8) {
    for (std::size_t r = 0; r < rows; ++r) {
      float* row = w.data + r * cols;
      const float s = detail_packed::int8_row_scale(row, cols);
      for (std::size_t j = 0; j < cols; ++j) row[j] = static_cast<float>(detail_packed::int8_of(row[j], s)) * s;
    }
  }
}

}  // namespace causalqwen::linalg
