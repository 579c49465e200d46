/// The product of a linear layer whose weights are a bf16 copy (packed_weight.hpp), computed in
/// bf16 with float sums, for any number of rows (a prefill of S tokens or one decoding step):
///   Y [M,N] = bf16(X) [M,K] · Wᵀ (+ b)
/// X is rounded to bf16 (nearest, ties to even) once per call; every product of two bf16
/// numbers is exact in float, and each output's sum runs in a fixed order that depends on K
/// alone, never on M, the row's place in X or the thread count: K is cut into chunks of 16
/// (zero-padded), and lane j ∈ [0,8) of a row's accumulator takes the pairs (2j, 2j+1) of
/// every chunk in turn, in the order AVX512-BF16's vdpbf16ps adds them,
///   l_j ← (l_j + x_{2j+1}·w_{2j+1}) + x_{2j}·w_{2j}
/// then  y = ((l₀+l₄)+(l₂+l₆)) + ((l₁+l₅)+(l₃+l₇)) (+ b).
/// On a CPU with AVX512-BF16 (checked at run time) each chunk of four W rows costs two
/// vdpbf16ps per row of X (32 multiply-adds each: twice the float FMA rate). On a CPU with AVX2
/// and FMA instead, X's rows are widened to float once per call with each chunk's odd values
/// first, and a W row's chunk is split in registers into its odd and even values as floats (a
/// mask and a shift), so that lane j takes the same two steps as two FMAs; from 24 rows of X on,
/// each lane's sums are a float product of their own instead, run on the float GEMM's tile, and
/// the lanes are added afterwards (multiply_lanes). Elsewhere a portable loop computes the same
/// sums in the same order. All give the same bits, except that
/// vdpbf16ps flushes subnormal inputs and results to zero and an FMA rounds a product below
/// float's normal range (|x·w| < 2⁻¹²⁶, where bf16 products stop being exact) together with the
/// sum.
/// An int8 copy of W (q ∈ [−127, 127], each a bf16 value exactly) goes through the same kernels
/// for many rows of X, each task widening its rows of q to bf16 first: y = s ⊙ (bf16(X)·Qᵀ) + b
/// (int8_rows_linear_forward), its sums as above.
/// The same kernels serve mixed-precision training (bf16_matmul: both operands rounded per call)
/// for X·Wᵀ; dYᵀ·X (whose sums run over the tokens) and dY·W (whose W holds the sum's index in
/// its rows) run on an outer-product kernel with its own fixed order, described in
/// kernels/bf16_outer_tiles.hpp (AVX512-BF16, AVX2 or the portable loop: the same bits again).
/// Call outside your own `omp parallel` regions (it then runs serially).
/// The kernels live in kernels/bf16_*.hpp (bf16_cpu: the instruction sets; bf16_tiles_*: the rows
/// product's micro-kernels; bf16_pack: its operands; bf16_rows and bf16_lanes: the rows product;
/// bf16_pairs, bf16_outer_tiles and bf16_outer: the outer products); this header chooses among
/// them (Bf16Kernel) and holds the public entry points.
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/int8_dot.hpp"
#include "causalqwen/linalg/kernel_choice.hpp"
#include "causalqwen/linalg/kernels/bf16_cpu.hpp"
#include "causalqwen/linalg/kernels/bf16_outer.hpp"
#include "causalqwen/linalg/kernels/bf16_pack.hpp"
#include "causalqwen/linalg/kernels/bf16_rows.hpp"
#include "causalqwen/linalg/kernels/onednn.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/format.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace causalqwen::linalg {

namespace detail_bf16 {

/// C [M,N] (+)= bf16(op(A))·bf16(op(B)): op(A) [M,K], op(B) [K,N], both rounded to bf16 once
/// per call: op(A) into a per-thread buffer (grown once per shape), op(B) task by task inside
/// `multiply`; then the sums of `multiply`. Aᵀ·B and A·B (B stored with K as its rows) run on
/// the outer-product kernel instead, with its order of the sums. `b_panels` (optional): a bf16 copy
/// of B in panels, of op(B)ᵀ [N,K] for A·Bᵀ or of B [K,N] for A·B, read instead of rounding B
/// (the same bits); `b_abs`: B holds |the copy's values| (the sign bits cleared); `b_panel_cols`
/// (A·B only): the panels' row length, when longer than N rounded up to 16.
inline void matmul(Bf16Isa isa, bool a_transposed, bool b_transposed, std::size_t M, std::size_t N, std::size_t K,
                   const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                   const std::uint16_t* b_panels = nullptr, bool b_abs = false, std::size_t b_panel_cols = 0) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = 0, or C unchanged
    if (!accumulate)
      for (std::size_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
    return;
  }
  if (a_transposed && !b_transposed)
    return isa == Bf16Isa::avx2 ? outer_product<float>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate)
                                : outer_product<std::uint32_t>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate);
  if (!a_transposed && !b_transposed)
    return isa == Bf16Isa::avx2
               ? row_outer_product<float>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_panels, b_abs, b_panel_cols)
               : row_outer_product<std::uint32_t>(isa, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_panels, b_abs,
                                                  b_panel_cols);
  const std::size_t Kp = (K + panel_cols - 1) / panel_cols * panel_cols;
  // the panels' row j is column j of op(B): stored as row j when B is transposed
  const PanelSource panels{b_transposed ? b_panels : nullptr, b, ldb, K, !b_transposed, b_transposed && b_abs};
  multiply_x(isa, a, lda, a_transposed, M, K, Kp, panels, N, c, ldc, accumulate, nullptr);
}

}  // namespace detail_bf16

/// Which kernels the bf16 products run. `automatic` (the default): a product of many rows
/// (onednn_min_rows, kernels/onednn_bf16.hpp) on oneDNN's matmul where the library is built
/// with oneDNN and oneDNN runs AMX on this CPU, everything else on the fastest of our own
/// kernels this CPU has (AVX512-BF16, else AVX2 with FMA). `onednn`: the products of many rows on
/// oneDNN whatever kernels it runs here (its AVX-512 ones without AMX; built with oneDNN only),
/// the rest as `automatic`. `own`: our fastest kernels only, never oneDNN. `avx2`: our AVX2
/// kernels even on a CPU with AVX512-BF16, and `portable`: the portable loop everywhere (the
/// same sums), both never oneDNN (for tests and comparisons).
enum class Bf16Kernel { automatic, avx2, portable, onednn, own };

/// Sets the kernel of every later bf16 product in this process.
inline void set_bf16_kernel(Bf16Kernel k) {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  detail::require(k != Bf16Kernel::onednn || onednn::bf16_supported(), "set_bf16_kernel",
                  "oneDNN makes no bf16 matmul on this CPU (its bf16 kernels need AVX-512 or AMX); choose auto, own, "
                  "avx2 or portable");
#endif
  kernel_choice<Bf16Kernel>() = k;
}

/// Whether the bf16 products of many rows can run on oneDNN here: built with it, and oneDNN
/// makes a bf16 matmul on this CPU (what set_bf16_kernel(Bf16Kernel::onednn) requires).
inline bool onednn_runs_bf16() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  return onednn::bf16_supported();
#else
  return false;
#endif
}

/// "auto", "onednn", "own", "avx2" or "portable" → the choice; anything else is refused with
/// the accepted names.
inline Bf16Kernel parse_bf16_kernel(std::string_view s) {
  if (s == "auto") return Bf16Kernel::automatic;
  if (s == "onednn") return Bf16Kernel::onednn;
  if (s == "own") return Bf16Kernel::own;
  if (s == "avx2") return Bf16Kernel::avx2;
  if (s == "portable") return Bf16Kernel::portable;
  throw DomainError("causalqwen::parse_bf16_kernel: unknown bf16 kernel '" + std::string(s) +
                    "': expected auto, onednn, own, avx2 or portable");
}

/// The instruction set our own bf16 products run on now (those that oneDNN does not run).
inline Bf16Isa bf16_kernel_isa() {
  const Bf16Kernel choice = kernel_choice<Bf16Kernel>();
  if (choice == Bf16Kernel::onednn || choice == Bf16Kernel::own) {
    if (detail_bf16::cpu_has_avx512_bf16()) return Bf16Isa::avx512_bf16;
    return cpu_has_avx2_fma() ? Bf16Isa::avx2 : Bf16Isa::portable;
  }
  return kernel_isa<Bf16Kernel>(detail_bf16::cpu_has_avx512_bf16(), Bf16Isa::avx512_bf16);
}

/// Whether the bf16 products of many rows run on oneDNN now: built with it, and the choice
/// `onednn`, or `automatic` on a CPU where oneDNN runs AMX.
inline bool bf16_products_on_onednn() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  const Bf16Kernel choice = kernel_choice<Bf16Kernel>();
  return choice == Bf16Kernel::onednn || (choice == Bf16Kernel::automatic && onednn::has_amx());
#else
  return false;
#endif
}

/// Whether the bf16 products run one of their instruction-set kernels now (oneDNN's,
/// AVX512-BF16 or AVX2).
inline bool bf16_kernel_is_hardware() { return bf16_products_on_onednn() || bf16_kernel_isa() != Bf16Isa::portable; }

/// "AVX512-BF16", "AVX2" or "portable": what our own bf16 kernels run on now (decoding's few
/// rows, and every product when oneDNN runs none).
inline const char* bf16_own_kernel_name() {
  switch (bf16_kernel_isa()) {
    case Bf16Isa::avx512_bf16: return "AVX512-BF16";
    case Bf16Isa::avx2: return "AVX2";
    default: return "portable";
  }
}

/// What the bf16 products of many rows (a prefill, a training step) run on now: oneDNN's
/// kernel ("AMX-BF16 (oneDNN)", "AVX512-BF16 (oneDNN)", …: kernels/onednn.hpp) or our own
/// (bf16_own_kernel_name).
inline std::string bf16_kernel_name() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (bf16_products_on_onednn()) return onednn::bf16_kernel_name();
#endif
  return bf16_own_kernel_name();
}

/// Y = bf16(X)·Wᵀ (+ b):  X [M,K], W [N,K] a bf16 copy (its first row at a multiple of 4 in
/// its panels), b [N] (optional), Y [M,N]. AVX512-BF16 or AVX2 when this CPU has it (checked at
/// run time), else the portable loop with the same sums.
inline void bf16_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                TensorView<const float, 1> b = {}) {
  detail_bf16::forward(bf16_kernel_isa(), y, x, w, b);
}

/// Whether a product of more than few_rows_max rows with an int8 copy of W runs on the bf16
/// product (int8_rows_linear_forward): when the int8 choice is automatic and the bf16 products
/// run on AVX512-BF16, where the bf16 product has twice the float FMA rate. Elsewhere (or with
/// set_int8_kernel(avx2 | portable)) such a product runs the float GEMM over the float matrix,
/// which holds q·s.
inline bool int8_rows_on_bf16() {
  return kernel_choice<Int8Kernel>() == Int8Kernel::automatic && bf16_kernel_isa() == Bf16Isa::avx512_bf16;
}

/// Y = s ⊙ (bf16(X)·Qᵀ) (+ b):  X [M,K], W [N,K] an int8 copy (w_nk = q_nk·s_n; its first row at
/// a multiple of 4 in its panels), b [N] (optional), Y [M,N]. X is rounded to bf16 once, each
/// q_nk is a bf16 value exactly, and each output is the bf16 product's sum (bf16_linear_forward's
/// order, every product exact) times s_n, plus b_n: a row's bits independent of M. On the bf16
/// kernel this CPU has (AVX512-BF16, AVX2 or the portable loop: the same bits).
inline void int8_rows_linear_forward(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                                     TensorView<const float, 1> b = {}) {
  detail_bf16::forward_int8(bf16_kernel_isa(), y, x, w, b);
}

/// C [M,N] = bf16(op(A))·bf16(op(B)) (+ C when `accumulate`), row-major with leading
/// dimensions lda, ldb, ldc, as linalg::matmul takes them: both operands rounded to bf16
/// (nearest even) once per call, every product exact, each output summed in float in an order
/// that depends on K alone (the file comment's; for Aᵀ·B, the outer-product kernel's). The
/// products of mixed-precision training. `b_copy` (optional; ignored unless it is a bf16 copy):
/// B's values in bf16 already, read instead of rounding B again, with the same results: the copy
/// of W [N,K] for X·Wᵀ (op_b transposed), or of W [K,N] for dY·W (op_b plain), its first row at a
/// multiple of 4 of its panels; B's floats are then not read (b may be null). A copy read as |W|
/// (PackedRef::abs) gives the products with |W|. For dY·W the copy's rows may be longer than N
/// (cols_padded: a store of more columns, of which B is the first N, as a KV cache's keys).
/// A copy in rows (PackedRef::rows_layout, for oneDNN) is widened to floats first (the same values).
inline void bf16_matmul(Op op_a, Op op_b, std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                        const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                        const PackedRef& b_copy = {}) {
  if (b_copy.type == Format::bf16 && b_copy.rows_layout) {  // widened to floats, which round back to the same values
    thread_local PageBuffer<float> widened;  // [copy rows, cols]
    const std::size_t rows = b_copy.rows, cols = b_copy.cols, ld_copy = b_copy.cols_padded;
    const std::uint16_t* src = b_copy.bf16 + b_copy.row0 * ld_copy;
    const std::uint16_t mask = b_copy.abs ? 0x7FFF : 0xFFFF;
    float* out = widened.grow(rows * cols);
    parallel_for(rows, rows * cols, [&](std::size_t r) {
      for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = bf16_to_float(static_cast<std::uint16_t>(src[r * ld_copy + c] & mask));
    });
    return bf16_matmul(op_a, op_b, M, N, K, a, lda, out, cols, c, ldc, accumulate);
  }
  const std::uint16_t* b_panels = nullptr;
  if (b_copy.type == Format::bf16 && op_a == Op::plain) {
    const bool transposed = op_b == Op::transposed;
    const std::size_t padded = (b_copy.cols + panel_cols - 1) / panel_cols * panel_cols;
    detail::require(b_copy.rows == (transposed ? N : K) && b_copy.cols == (transposed ? K : N) && b_copy.row0 % panel_rows == 0 &&
                        b_copy.cols_padded % panel_cols == 0 && (transposed ? b_copy.cols_padded == padded : b_copy.cols_padded >= padded),
                    "bf16_matmul", "the bf16 copy [{},{}] (first row {}, rows of {} in its panels) is not B {} starting at a multiple of 4",
                    b_copy.rows, b_copy.cols, b_copy.row0, b_copy.cols_padded,
                    transposed ? shape_text(Shape<2>{N, K}) : shape_text(Shape<2>{K, N}));
    b_panels = b_copy.bf16 + b_copy.row0 * b_copy.cols_padded;
  }
  detail_bf16::matmul(bf16_kernel_isa(), op_a == Op::transposed, op_b == Op::transposed, M, N, K, a, lda, b, ldb,
                      c, ldc, accumulate, b_panels, b_copy.abs, b_panels ? b_copy.cols_padded : 0);
}

}  // namespace causalqwen::linalg
