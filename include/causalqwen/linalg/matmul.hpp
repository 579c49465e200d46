/// The library's one general matrix product, C [M,N] = op(A)·op(B) (+ C), row-major, and the
/// back ends it runs on. Float products run on the library's own kernel (f32_gemm.hpp) when the
/// CPU has AVX-512F, or AVX2 with FMA (unless the program is built with oneDNN): each output one
/// chain of fused multiply-adds over k, the same bits for any M, blocking, thread count or
/// instruction set. Double products, and float ones on CPUs with neither, run on a back end
/// chosen when the program is built:
/// - oneDNN's matmul primitive (float, built with CAUSALQWEN_ONEDNN): brgemm kernels picked at
///   run time by CPUID (AVX-512, AVX512-BF16, AMX), threaded by the same OpenMP pool as the
///   rest of the library, so no second thread pool spins beside ours. Each shape's primitive is
///   made once and cached per thread; a call in steady state makes no large allocation.
/// - the linked BLAS (sgemm_/dgemm_, when EIGEN_USE_BLAS), threaded by this file: the product
///   is cut into blocks of C whose width depends on the shape alone, and the blocks run on the
///   OpenMP threads, one single-threaded BLAS call each. Every element is then the same sum in
///   the same order whatever the number of threads (OpenBLAS's own threaded driver rounds
///   differently for another split and allocates a job table on every call).
/// - Eigen's product otherwise.
/// Call outside your own `omp parallel` regions: the back ends thread the product themselves
/// (inside one, the product runs on the calling thread).
#pragma once
#include "causalqwen/core/eigen_map.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/f32_gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <type_traits>

#ifdef CAUSALQWEN_ONEDNN
#include "causalqwen/linalg/kernels/onednn.hpp"

#include <map>
#include <tuple>
#endif

namespace causalqwen::linalg {

/// Whether an operand is read as stored (row-major [rows, cols]) or transposed.
enum class Op : bool { plain = false, transposed = true };

#ifdef CAUSALQWEN_ONEDNN
namespace detail_onednn {

/// One cached oneDNN matmul: the primitive and its three memory objects, whose data handles
/// are re-pointed at every call.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

/// What a primitive depends on: shapes, strides, whether C accumulates, the thread count.
using MatmulKey = std::tuple<std::size_t, std::size_t, std::size_t, bool, bool, std::size_t,
                             std::size_t, std::size_t, bool, int>;

/// The CPU engine (kernels/onednn.hpp).
inline const dnnl::engine& cpu_engine() { return onednn::cpu_engine(); }

/// row-major [rows, cols] with leading dimension ld, read as stored or transposed.
inline dnnl::memory::desc matrix_desc(std::size_t rows, std::size_t cols, Op op, std::size_t ld) {
  using dim = dnnl::memory::dim;
  const dnnl::memory::dims dims{dim(rows), dim(cols)};
  const dnnl::memory::dims strides =
      op == Op::plain ? dnnl::memory::dims{dim(ld), 1} : dnnl::memory::dims{1, dim(ld)};
  return {dims, dnnl::memory::data_type::f32, strides};
}

/// The cached matmul for this call's shape (made on first use in this thread).
inline Matmul& matmul_for(const MatmulKey& key) {
  thread_local std::map<MatmulKey, Matmul> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto [m, n, k, ta, tb, lda, ldb, ldc, accumulate, threads] = key;
  (void)threads;
  const auto a_desc = matrix_desc(m, k, Op(ta), lda);
  const auto b_desc = matrix_desc(k, n, Op(tb), ldb);
  const auto c_desc = matrix_desc(m, n, Op::plain, ldc);
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const auto& engine = cpu_engine();
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr, engine);
  Matmul made{dnnl::matmul(pd), dnnl::memory(a_desc, engine, nullptr),
              dnnl::memory(b_desc, engine, nullptr), dnnl::memory(c_desc, engine, nullptr)};
  return cache.emplace(key, std::move(made)).first->second;
}

/// C = op(A)·op(B) (+ C) on oneDNN, float.
inline void matmul(Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k, const float* a,
                   std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc,
                   bool accumulate) {
  const MatmulKey key{m, n, k, bool(op_a), bool(op_b), lda, ldb, ldc, accumulate, omp_get_max_threads()};
  Matmul& mm = matmul_for(key);
  thread_local dnnl::stream stream(cpu_engine());
  // The C API from here on: the C++ execute() builds a container of arguments at every call.
  auto check = [](dnnl_status_t status, const char* what) {
    detail::require(status == dnnl_success, "matmul", "oneDNN {} failed (status {})", what, int(status));
  };
  check(dnnl_memory_set_data_handle_v2(mm.a.get(), const_cast<float*>(a), stream.get()), "set A");
  check(dnnl_memory_set_data_handle_v2(mm.b.get(), const_cast<float*>(b), stream.get()), "set B");
  check(dnnl_memory_set_data_handle_v2(mm.c.get(), c, stream.get()), "set C");
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mm.a.get()}, {DNNL_ARG_WEIGHTS, mm.b.get()},
                                   {DNNL_ARG_DST, mm.c.get()}};
  check(dnnl_primitive_execute(mm.primitive.get(), stream.get(), 3, args), "execute");
  check(dnnl_stream_wait(stream.get()), "wait");
}

}  // namespace detail_onednn
#endif

#ifdef EIGEN_USE_BLAS
namespace detail_blas {
/// Row-major C = op(A)·op(B) + beta·C is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ + beta·Cᵀ.
template <class T>
void gemm(Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate) {
  const char tb = op_b == Op::plain ? 'N' : 'T', ta = op_a == Op::plain ? 'N' : 'T';
  const int rows = int(n), cols = int(m), depth = int(k), la = int(lda), lb = int(ldb), lc = int(ldc);
  const T one = T(1), beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    sgemm_(&tb, &ta, &rows, &cols, &depth, &one, b, &lb, a, &la, &beta, c, &lc);
  else
    dgemm_(&tb, &ta, &rows, &cols, &depth, &one, b, &lb, a, &la, &beta, c, &lc);
}

/// Products with fewer multiply-adds than this run on the calling thread (the BLAS also keeps
/// them on one thread).
inline constexpr double parallel_multiply_adds = 64.0 * 64.0 * 64.0;

/// The width of the blocks an extent of C is cut into: the extent split into the smallest
/// power-of-two count (≥ 2) of blocks of at most 1024, rounded up to 16. A function of the
/// shape alone, and the counts balance on 2, 4, 8 threads.
inline std::size_t block_width(std::size_t extent) {
  std::size_t blocks = 2;
  while ((extent + blocks - 1) / blocks > 1024) blocks *= 2;
  const std::size_t width = (extent + blocks - 1) / blocks;
  return std::max<std::size_t>(16, (width + 15) / 16 * 16);
}

/// C = op(A)·op(B) (+ C) in blocks of C's columns (or of its rows, when C has more rows than
/// columns), each a single-threaded BLAS call; the blocks run in parallel when the product is
/// large enough. Inside a parallel region (team of ≥ 2) the BLAS stays on one thread; a
/// product of one block also runs in a region, so that the BLAS never threads it itself.
template <class T>
void gemm_blocks(Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                 const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate) {
  const bool by_columns = n >= m;
  const std::size_t extent = by_columns ? n : m, width = block_width(extent);
  const auto blocks = static_cast<std::int64_t>((extent + width - 1) / width);
  const auto run = [&](std::int64_t i) {
    const std::size_t first = static_cast<std::size_t>(i) * width, count = std::min(width, extent - first);
    if (by_columns)  // columns [first, first + count) of C come from the same columns of op(B)
      gemm<T>(op_a, op_b, m, count, k, a, lda, op_b == Op::plain ? b + first : b + first * ldb, ldb, c + first, ldc,
              accumulate);
    else  // rows of C from the same rows of op(A)
      gemm<T>(op_a, op_b, count, n, k, op_a == Op::plain ? a + first * lda : a + first, lda, b, ldb, c + first * ldc,
              ldc, accumulate);
  };
  const double multiply_adds = double(m) * double(n) * double(k);
  if (multiply_adds < parallel_multiply_adds || omp_in_parallel() || omp_get_max_threads() == 1) {
    for (std::int64_t i = 0; i < blocks; ++i) run(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < blocks; ++i) run(i);
}
}  // namespace detail_blas
#endif

/// C [M,N] = op(A)·op(B), or C += op(A)·op(B) when `accumulate`; every matrix row-major with
/// the given leading dimension (elements between rows as stored): op(A) [M,K], op(B) [K,N].
template <class T>
void matmul(Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k, const T* a,
            std::size_t lda, const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "matmul runs on float or double matrices");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = 0, or C unchanged
    if (!accumulate)
      for (std::size_t r = 0; r < m; ++r) std::fill_n(c + r * ldc, n, T(0));
    return;
  }
#ifdef CAUSALQWEN_ONEDNN
  if constexpr (std::is_same_v<T, float>)
    return detail_onednn::matmul(op_a, op_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#endif
  if constexpr (std::is_same_v<T, float>)
    if (f32_kernel_is_hardware())
      return f32_matmul(op_a == Op::transposed, op_b == Op::transposed, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#ifdef EIGEN_USE_BLAS
  return detail_blas::gemm_blocks<T>(op_a, op_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#else
  using Stride = Eigen::OuterStride<>;
  using P = std::ptrdiff_t;
  const auto as_stored = [](const T* p, std::size_t rows, std::size_t cols, std::size_t ld) {
    return ConstStridedMatMap<T>(p, P(rows), P(cols), Stride(P(ld)));
  };
  StridedMatMap<T> C(c, P(m), P(n), Stride(P(ldc)));
  const auto A = op_a == Op::plain ? as_stored(a, m, k, lda) : as_stored(a, k, m, lda);
  const auto B = op_b == Op::plain ? as_stored(b, k, n, ldb) : as_stored(b, n, k, ldb);
  if (!accumulate) C.setZero();
  if (op_a == Op::plain && op_b == Op::plain) C.noalias() += A * B;
  else if (op_a == Op::plain) C.noalias() += A * B.transpose();
  else if (op_b == Op::plain) C.noalias() += A.transpose() * B;
  else C.noalias() += A.transpose() * B.transpose();
#endif
}

}  // namespace causalqwen::linalg
