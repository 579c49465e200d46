/// bf16 copies of weight matrices kept between the steps of mixed-precision training. A bf16
/// product rounds W to bf16 each time it reads it: the forward product X·Wᵀ and the backward
/// product dY·W each make a pass over the float W and write its bf16 panels. The copies hold
///   copy(W) = bf16(W)  (round to nearest even; the same values the products would round to)
/// in the products' panels (panel_index), written by the optimiser right after it updates each
/// block of rows (an UpdateFollower: linalg/update_follower.hpp), while the rows are in cache. The
/// products then read 2 bytes per weight instead of 4 and round nothing; their results keep
/// their bits. A copy is used only while it is current: after any other change of the
/// parameters (a load, a sharded step, a clamp) the arena's version moves on, and the products
/// round W themselves again until the next step that hands every row over.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/linalg/update_follower.hpp"
#include "causalqwen/linalg/bf16_gemm.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace causalqwen::linalg {

/// Whether mixed-precision training keeps bf16 copies of the layers' weights and W_cls (`kept`: 2 bytes
/// per weight, one pass over the weights fewer per product) or rounds W in every product (`none`).
enum class WeightCopies { kept, none };

class Bf16Copies final : public UpdateFollower<float> {
 public:
  /// Copies in the products' panels (`panels`: our own kernels read them), or row after row
  /// (`rows`, rows cols_padded apart: the layout oneDNN's products read, kernels/onednn_bf16.hpp;
  /// our own kernels then round the float weights instead).
  explicit Bf16Copies(detail_bf16::PackLayout layout = detail_bf16::PackLayout::panels) : layout_(layout) {}

  /// Adds a copy of the matrix w [rows, cols], a view of `params` that may span several
  /// consecutive slots of cols columns each (q|k|v), and returns it for the products. The copy
  /// is not current until an optimiser step has handed over its rows.
  PackedRef add(const Arena<float>& params, TensorView<const float, 2> w) {
    const std::size_t rows = w.shape[0], cols = w.shape[1];
    const auto offset = static_cast<std::size_t>(w.data - params.data());
    detail::require(w.data >= params.data() && offset + rows * cols <= params.size(), "Bf16Copies::add",
                    "the matrix {} is not a view of the parameter arena", shape_text(w.shape));
    Matrix m;
    m.offset = offset, m.rows = rows, m.cols = cols, m.cols_padded = (cols + panel_cols - 1) / panel_cols * panel_cols;
    m.panels = PageBuffer<std::uint16_t>((rows + panel_rows - 1) / panel_rows * panel_rows * m.cols_padded);  // zero padding
    matrices_.push_back(std::move(m));
    const std::size_t index = matrices_.size() - 1;
    for (const auto& s : params.layout().slots())  // the slots the matrix spans, by their rows
      if (s.shape.size() == 2 && s.shape[1] == cols && s.offset >= offset && s.offset + s.size <= offset + rows * cols)
        slots_.push_back({s.offset, index, (s.offset - offset) / cols});
    std::sort(slots_.begin(), slots_.end(), [](const SlotRows& a, const SlotRows& b) { return a.offset < b.offset; });
    version_ = none;
    const Matrix& added = matrices_.back();
    return {Format::bf16, rows, cols, added.cols_padded, 0, added.panels.data(), nullptr, nullptr, false, nullptr, 0,
            layout_ == detail_bf16::PackLayout::rows};
  }

  /// Whether the copies hold bf16 of the parameters at `version` (Arena::version()).
  bool current(std::uint64_t version) const { return version_ == version && version != none; }
  /// Bytes of the copies (their padding included).
  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto& m : matrices_) n += m.panels.size() * sizeof(std::uint16_t);
    return n;
  }

  std::ptrdiff_t follow(const Layout::Slot& slot) const override {
    const auto it = std::lower_bound(slots_.begin(), slots_.end(), slot.offset,
                                     [](const SlotRows& s, std::size_t offset) { return s.offset < offset; });
    return it != slots_.end() && it->offset == slot.offset ? it - slots_.begin() : not_followed;
  }
  /// copy rows ← bf16 of the slot's rows [r0, r1) (its rows row_in_matrix + r0 … of the matrix).
  void rows_updated(std::ptrdiff_t handle, const float* rows, std::size_t r0, std::size_t r1) override {
    const SlotRows& s = slots_[static_cast<std::size_t>(handle)];
    Matrix& m = matrices_[s.matrix];
    const float* matrix = rows - (s.row_in_matrix + r0) * m.cols;  // row 0 of the matrix
    const std::size_t j0 = s.row_in_matrix + r0, j1 = s.row_in_matrix + r1;
#ifdef CAUSALQWEN_BF16_KERNEL
    if (detail_bf16::cpu_has_avx512_bf16())
      return detail_bf16::pack_block_avx512(matrix, m.cols, false, m.rows, m.cols, m.cols_padded, layout_, m.panels.data(), j0, j1);
    if (cpu_has_avx2_fma())
      return detail_bf16::pack_block_avx2(matrix, m.cols, m.rows, m.cols, m.cols_padded, layout_, m.panels.data(), j0, j1);
#endif
    for (std::size_t j = j0; j < j1; ++j)
      for (std::size_t c = 0; c < m.cols; ++c)
        m.panels[layout_ == detail_bf16::PackLayout::rows ? j * m.cols_padded + c : panel_index(j, c, m.cols_padded)] =
            float_to_bf16(matrix[j * m.cols + c]);
  }
  void step_done(std::uint64_t version) override { version_ = version; }

 private:
  static constexpr std::uint64_t none = ~std::uint64_t{0};
  struct Matrix {
    std::size_t offset = 0, rows = 0, cols = 0, cols_padded = 0;  // offset: of row 0 in the arena
    PageBuffer<std::uint16_t> panels;
  };
  struct SlotRows {
    std::size_t offset = 0;         // the slot's, in the arena
    std::size_t matrix = 0;         // index in matrices_
    std::size_t row_in_matrix = 0;  // the matrix row of the slot's row 0
  };
  detail_bf16::PackLayout layout_ = detail_bf16::PackLayout::panels;
  std::vector<Matrix> matrices_;
  std::vector<SlotRows> slots_;  // by offset
  std::uint64_t version_ = none;
};

}  // namespace causalqwen::linalg
