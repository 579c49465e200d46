/// The bf16 and int8 products of many rows on oneDNN's matmul (kernels/onednn.hpp), where
/// bf16_products_on_onednn() says so (bf16_gemm.hpp: by default, when oneDNN runs AMX here):
///   prefill, bf16 weights:   Y [M,N] = bf16(X) [M,K] · Wᵀ (+ b)
///   prefill, int8 weights:   Y = s_x ⊙ s_w ⊙ (q(X)·Qᵀ) (+ b)   (onednn_int8_prefill: s8)
///                            Y = s_w ⊙ (bf16(X)·Qᵀ) (+ b)      (bf16: Q widened to bf16, exact)
///   training (mixed precision): C (+)= bf16(op(A)) · bf16(op(B))
/// with q(X)_mk = round(x_mk / s_m) ∈ [−127, 127], s_m = max_k |x_mk| / 127 (one scale per row of
/// X; an all-zero row has s_m = 1), and W's int8 copy w_nk = q_nk·s_n (packed_weight.hpp).
/// Sums run in float (bf16) or exactly in int32 (s8), in the order oneDNN's kernel chooses: a
/// row's result may depend on how many rows the product has (unlike our own kernels), so a
/// prefill and a decoding step of the same token may differ in the last bits.
/// Each primitive is made once per shape and thread (cached), its scratchpad user-managed;
/// X is rounded (or quantised) into buffers kept per thread; a packed W is reordered once into
/// the layout the primitive asks for and kept with the matrix (PackedMatrix's LazyCopy), made by
/// its first product of many rows. Training's W comes from the bf16 copies the optimiser keeps
/// in rows (Bf16Copies with PackLayout::rows), or is rounded at every call into a kept buffer.
/// Without CAUSALQWEN_HAVE_ONEDNN only onednn_min_rows and the dispatch predicates exist, and
/// they say no.
#pragma once
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/bf16_gemm.hpp"
#include "causalqwen/linalg/int8_dot.hpp"
#include "causalqwen/linalg/kernel_choice.hpp"
#include "causalqwen/linalg/kernels/onednn.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/packed_weight.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace causalqwen::linalg {

/// Rows from which a bf16 or int8 product runs on oneDNN (when bf16_products_on_onednn()):
/// fewer (a decoding step, a short prompt) stay on our own kernels, bound by reading W.
inline constexpr std::size_t onednn_min_rows = 16;

/// How a prefill with int8 weights runs on oneDNN: X quantised per row to s8 and the integer
/// products (`s8`: AMX-INT8 where the CPU has it), or Q widened to bf16 and X rounded to bf16
/// (`bf16`: AMX-BF16, X keeps 8 bits of mantissa instead of 7 bits per row).
enum class OnednnInt8 { s8, bf16 };

/// The current way of onednn int8 prefill (s8 until set), one per process.
inline std::atomic<OnednnInt8>& onednn_int8_prefill() {
  static std::atomic<OnednnInt8> way{OnednnInt8::s8};
  return way;
}

/// The way an int8 prefill runs on oneDNN here: the one chosen, except that s8 becomes bf16 on a
/// CPU whose s8 products oneDNN does not sum exactly (no VNNI, no AMX).
inline OnednnInt8 onednn_int8_way() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (!onednn::int8_sums_exact()) return OnednnInt8::bf16;
#endif
  return onednn_int8_prefill();
}

/// Whether a bf16 product of `rows` rows runs on oneDNN now.
inline bool bf16_rows_on_onednn(std::size_t rows) { return rows >= onednn_min_rows && bf16_products_on_onednn(); }

/// Whether a product of `rows` rows with the packed copy `w` runs on oneDNN now: bf16 or int8,
/// the whole matrix (its copy in oneDNN's layout is of the whole), not read as |W|, and the
/// int8 choice automatic for an int8 copy.
inline bool packed_rows_on_onednn(std::size_t rows, const PackedRef& w) {
  if (!w.packed() || w.lazy == nullptr || w.abs || w.row0 != 0 || w.rows != w.store_rows) return false;
  if (w.type == Format::int8 && kernel_choice<Int8Kernel>() != Int8Kernel::automatic) return false;
  return bf16_rows_on_onednn(rows);
}

/// "AMX-INT8 (oneDNN)" or "AMX-BF16 (oneDNN)" (…): what a prefill with int8 weights runs on now
/// when it runs on oneDNN (else empty).
inline std::string onednn_int8_prefill_name() {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (bf16_products_on_onednn() && kernel_choice<Int8Kernel>() == Int8Kernel::automatic)
    return onednn_int8_way() == OnednnInt8::s8 ? onednn::int8_kernel_name() : onednn::bf16_kernel_name();
#endif
  return {};
}

#ifdef CAUSALQWEN_HAVE_ONEDNN
namespace onednn {

using dt = dnnl::memory::data_type;
using dim = dnnl::memory::dim;

/// A packed matrix W [N,K] as oneDNN's weights Wᵀ [K,N] in the layout its matmul asks for
/// (`desc`), of type bf16 or s8 (with oneDNN's compensation, for s8 sources).
struct BlockedWeights {
  dnnl::memory::desc desc;
  PageBuffer<std::uint8_t> data;
};

/// The layout oneDNN's matmul asks for its weights [K,N] of `type` (bf16 or s8, the source of
/// the same type, float or int32 results): asked of a primitive of 512 rows (the layout does
/// not depend on the row count).
inline dnnl::memory::desc weights_layout(std::size_t K, std::size_t N, dt type) {
  const dnnl::memory::desc src({512, dim(K)}, type, dnnl::memory::format_tag::ab),
      weights({dim(K), dim(N)}, type, dnnl::memory::format_tag::any),
      dst({512, dim(N)}, type == dt::s8 ? dt::s32 : dt::f32, dnnl::memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), cpu_engine()).weights_desc();
}

/// W's packed copy (rows of the whole store) reordered into oneDNN's layout: bf16 (a bf16 copy,
/// or an int8 copy's q widened, exact) or s8 (an int8 copy's q).
inline std::shared_ptr<BlockedWeights> make_blocked(const PackedRef& w, dt type) {
  const std::size_t N = w.rows, K = w.cols, Kp = w.cols_padded, bytes = type == dt::s8 ? 1 : 2;
  // W [N,K] row-major and dense: oneDNN's reorder into a layout with s8 compensation (VNNI
  // without AMX) takes no padded rows
  PageBuffer<std::uint8_t> plain(N * K * bytes);
  parallel_for(N, N * K, [&](std::size_t r) {
    for (std::size_t c = 0; c < K; ++c) {
      const std::size_t i = panel_index(r, c, Kp);
      if (type == dt::s8)
        reinterpret_cast<std::int8_t*>(plain.data())[r * K + c] = w.q[i];
      else
        reinterpret_cast<std::uint16_t*>(plain.data())[r * K + c] =
            w.type == Format::bf16 ? w.bf16[i] : float_to_bf16(static_cast<float>(w.q[i]));
    }
  });
  auto made = std::make_shared<BlockedWeights>();
  made->desc = weights_layout(K, N, type);
  made->data = PageBuffer<std::uint8_t>(made->desc.get_size());
  const auto& engine = cpu_engine();
  dnnl::memory from(strided_desc(N, K, K, true, type), engine, plain.data());
  dnnl::memory to(made->desc, engine, made->data.data());
  dnnl::stream stream(engine);
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  return made;
}

/// The copy of `w` in oneDNN's layout of `type`, made on the first call (thread-safe) and kept.
inline const BlockedWeights& blocked(const PackedRef& w, dt type) {
  const int slot = type == dt::s8 ? 1 : 0;
  std::call_once(w.lazy->made[slot], [&] { w.lazy->value[slot] = make_blocked(w, type); });
  return *static_cast<const BlockedWeights*>(w.lazy->value[slot].get());
}

/// A thread's buffer `slot` (0: the source, 1: the weights) of bf16 values, grown to n.
inline std::uint16_t* bf16_buffer(int slot, std::size_t n) {
  thread_local PageBuffer<std::uint16_t> buffers[2];
  return buffers[slot].grow(n);
}

/// R [rows, cols] (r_jk = src[j·ld + k]) rounded to bf16 into buffer `slot`, rows padded to a
/// multiple of 16 values (zero past cols); returns the buffer, its row length in `ld_out`.
inline const std::uint16_t* rounded_rows(int slot, const float* src, std::size_t ld, std::size_t rows, std::size_t cols,
                                         std::size_t& ld_out) {
  ld_out = panel_padded_cols(cols);
  std::uint16_t* out = bf16_buffer(slot, rows * ld_out);
  detail_bf16::pack(bf16_kernel_isa(), src, ld, false, rows, cols, ld_out, detail_bf16::PackLayout::rows, out);
  return out;
}

/// The thread count, as primitives depend on it.
inline std::int64_t threads() { return omp_get_max_threads(); }

/// Y = bf16(X)·Wᵀ (+ b), W a bf16 copy (the whole matrix): X [M,K], Y [M,N], b [N] or empty.
inline void forward_bf16(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                         TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows;
  const BlockedWeights& weights = blocked(w, dt::bf16);
  std::size_t ldx = 0;
  const std::uint16_t* xb = rounded_rows(0, x.data, K, M, K, ldx);
  const MatmulKey key{1, std::int64_t(M), std::int64_t(N), std::int64_t(K), std::int64_t(ldx), !b.empty(), threads()};
  Matmul& mm = cached_matmul(key, [&] {
    const dnnl::memory::desc bias({1, dim(N)}, dt::f32, dnnl::memory::format_tag::ab);
    return make_matmul(strided_desc(M, K, ldx, false, dt::bf16), weights.desc, strided_desc(M, N, N, false, dt::f32),
                       b.empty() ? nullptr : &bias, false);
  });
  run(mm, xb, weights.data.data(), b.empty() ? nullptr : b.data, y.data);
}

/// s_m = max_k |x_mk| / 127 (1 for a row of zeros or one holding ±∞ or NaN) and
/// q_mk = round(x_mk / s_m) ∈ [−127, 127] (packed_weight.hpp's int8 rule, per row of X).
inline void quantise_rows(const float* x, std::size_t M, std::size_t K, std::size_t ldq, std::int8_t* q, float* scale) {
  parallel_for(M, M * K, [&](std::size_t m) {
    const float* row = x + m * K;
    const float s = scale[m] = detail_packed::int8_row_scale(row, K);
    const float inv = 1.0f / s;
    std::int8_t* out = q + m * ldq;
    for (std::size_t k = 0; k < K; ++k) {
      const float r = std::nearbyint(row[k] * inv);
      out[k] = static_cast<std::int8_t>(std::clamp(r == r ? r : 0.0f, -127.0f, 127.0f));
    }
  });
}

/// Y = s_x ⊙ s_w ⊙ (q(X)·Qᵀ) (+ b) on oneDNN's s8 matmul (int32 sums), or (OnednnInt8::bf16)
/// Y = s_w ⊙ (bf16(X)·Qᵀ) (+ b): W an int8 copy (the whole matrix).
inline void forward_int8(TensorView<float, 2> y, TensorView<const float, 2> x, const PackedRef& w,
                         TensorView<const float, 1> b) {
  const std::size_t M = x.shape[0], K = x.shape[1], N = w.rows;
  const float* sw = w.row_scale + w.row0;
  if (onednn_int8_way() == OnednnInt8::bf16) {
    const BlockedWeights& weights = blocked(w, dt::bf16);
    std::size_t ldx = 0;
    const std::uint16_t* xb = rounded_rows(0, x.data, K, M, K, ldx);
    const MatmulKey key{2, std::int64_t(M), std::int64_t(N), std::int64_t(K), std::int64_t(ldx), threads()};
    Matmul& mm = cached_matmul(key, [&] {
      return make_matmul(strided_desc(M, K, ldx, false, dt::bf16), weights.desc, strided_desc(M, N, N, false, dt::f32), nullptr,
                         false);
    });
    run(mm, xb, weights.data.data(), nullptr, y.data);
    parallel_for(M, M * N, [&](std::size_t m) {
      float* row = y.data + m * N;
      for (std::size_t n = 0; n < N; ++n) row[n] = row[n] * sw[n] + (b.empty() ? 0.0f : b.data[n]);
    });
    return;
  }
  const BlockedWeights& weights = blocked(w, dt::s8);
  const std::size_t ldq = (K + 63) / 64 * 64;
  thread_local PageBuffer<std::int8_t> q;
  thread_local PageBuffer<float> sx;
  thread_local PageBuffer<std::int32_t> acc;
  quantise_rows(x.data, M, K, ldq, q.grow(M * ldq), sx.grow(M));
  const MatmulKey key{3, std::int64_t(M), std::int64_t(N), std::int64_t(K), std::int64_t(ldq), threads()};
  Matmul& mm = cached_matmul(key, [&] {
    return make_matmul(strided_desc(M, K, ldq, false, dt::s8), weights.desc, strided_desc(M, N, N, false, dt::s32), nullptr,
                       false);
  });
  run(mm, q.data(), weights.data.data(), nullptr, acc.grow(M * N));
  const std::int32_t* sums = acc.data();
  const float* row_scale = sx.data();
  parallel_for(M, M * N, [&](std::size_t m) {
    float* row = y.data + m * N;
    const std::int32_t* s = sums + m * N;
    const float s_m = row_scale[m];
    for (std::size_t n = 0; n < N; ++n) row[n] = (s_m * sw[n]) * static_cast<float>(s[n]) + (b.empty() ? 0.0f : b.data[n]);
  });
}

/// C [M,N] (+)= bf16(op(A))·bf16(op(B)), as bf16_matmul takes them: A and B rounded into kept
/// buffers; B read from `b_copy` when it is a bf16 copy: in place when in rows
/// (PackedRef::rows_layout) and not read as |W|, else its values copied into rows first.
inline void matmul_bf16(Op op_a, Op op_b, std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                        const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate, const PackedRef& b_copy) {
  if (M == 0 || N == 0) return;
  const bool ta = op_a == Op::transposed, tb = op_b == Op::transposed;
  // A as stored: [M,K], or [K,M] when transposed
  std::size_t lda_b = 0, ldb_b = 0;
  const std::uint16_t* ab = rounded_rows(0, a, lda, ta ? K : M, ta ? M : K, lda_b);
  const std::uint16_t* bb = nullptr;
  const std::size_t b_rows = tb ? N : K, b_cols = tb ? K : N;  // B as stored
  if (b_copy.type == Format::bf16) {
    detail::require(b_copy.rows == b_rows && b_copy.cols == b_cols, "onednn::matmul_bf16", "the bf16 copy [{},{}] is not B [{},{}]",
                    b_copy.rows, b_copy.cols, b_rows, b_cols);
    if (b_copy.rows_layout && !b_copy.abs) {
      bb = b_copy.bf16 + b_copy.row0 * b_copy.cols_padded;
      ldb_b = b_copy.cols_padded;
    } else {  // |copy|, or a copy in panels: its values into rows
      ldb_b = panel_padded_cols(b_cols);
      std::uint16_t* out = bf16_buffer(1, b_rows * ldb_b);
      const std::uint16_t mask = b_copy.abs ? 0x7FFF : 0xFFFF;
      parallel_for(b_rows, b_rows * b_cols, [&](std::size_t r) {
        const std::size_t j = b_copy.row0 + r;
        for (std::size_t col = 0; col < b_cols; ++col)
          out[r * ldb_b + col] = static_cast<std::uint16_t>(
              (b_copy.rows_layout ? b_copy.bf16[j * b_copy.cols_padded + col] : b_copy.bf16[panel_index(j, col, b_copy.cols_padded)]) & mask);
      });
      bb = out;
    }
  } else {
    detail::require(b != nullptr, "onednn::matmul_bf16", "B is null and no bf16 copy was given");
    bb = rounded_rows(1, b, ldb, b_rows, b_cols, ldb_b);
  }
  const MatmulKey key{4, std::int64_t(M), std::int64_t(N), std::int64_t(K), ta, tb, std::int64_t(lda_b), std::int64_t(ldb_b),
                      std::int64_t(ldc), accumulate, threads()};
  Matmul& mm = cached_matmul(key, [&] {
    return make_matmul(strided_desc(ta ? K : M, ta ? M : K, lda_b, ta, dt::bf16), strided_desc(tb ? N : K, tb ? K : N, ldb_b, tb, dt::bf16),
                       strided_desc(M, N, ldc, false, dt::f32), nullptr, accumulate);
  });
  run(mm, ab, bb, nullptr, c);
}

}  // namespace onednn
#endif

/// Y = bf16(X)·Wᵀ (+ b) or the int8 copy's product on oneDNN (packed_rows_on_onednn must hold).
inline void onednn_packed_linear_forward([[maybe_unused]] TensorView<float, 2> y, [[maybe_unused]] TensorView<const float, 2> x,
                                         [[maybe_unused]] const PackedRef& w, [[maybe_unused]] TensorView<const float, 1> b) {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (w.type == Format::int8) return onednn::forward_int8(y, x, w, b);
  return onednn::forward_bf16(y, x, w, b);
#else
  detail::require(false, "onednn_packed_linear_forward", "the library is built without oneDNN");
#endif
}

/// bf16_matmul's product on oneDNN when op(A) has at least onednn_min_rows rows, K too, and
/// oneDNN runs the bf16 products now; else bf16_matmul itself.
inline void bf16_matmul_rows(Op op_a, Op op_b, std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                             const float* b, std::size_t ldb, float* c, std::size_t ldc, bool accumulate,
                             const PackedRef& b_copy = {}) {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  if (bf16_rows_on_onednn(std::min(M, K)) && K > 0 && (b != nullptr || b_copy.type == Format::bf16))
    return onednn::matmul_bf16(op_a, op_b, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_copy);
#endif
  bf16_matmul(op_a, op_b, M, N, K, a, lda, b, ldb, c, ldc, accumulate, b_copy);
}

}  // namespace causalqwen::linalg
