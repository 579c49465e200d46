// One side of benchmarks/kernels/gemm_ab.sh: the library's linear products (linalg/gemm.hpp) behind a
// C function named by GEMM_AB_NAME, so that two versions of the headers can be compiled into
// one program (the older one with its namespace renamed on the command line) and timed call
// after call in the same process.
#include <causalqwen/linalg/gemm.hpp>

/// which: 0 forward Y[M,N] = X[M,K]·W[N,K]ᵀ; 1 dX[M,K] += dY[M,N]·W[N,K]; 2 dW[N,K] += dY[M,N]ᵀ·X[M,K].
/// out, in, w are those products' C, first operand and second operand; bf16 != 0 runs them with
/// Format::bf16 (mixed-precision training's products).
extern "C" void GEMM_AB_NAME(float* out, const float* in, const float* w, std::size_t M, std::size_t N, std::size_t K, int which,
                             int bf16) {
  namespace la = causalqwen::linalg;
  using causalqwen::TensorView;
#if __has_include(<causalqwen/linalg/format.hpp>)  // one enum names the storage formats
  using Format = la::Format;
#else  // headers with an enum of their own for the products' precision
  using Format = la::Precision;
#endif
  const auto p = bf16 ? Format::bf16 : Format::f32;
#if __has_include(<causalqwen/linalg/weight.hpp>)  // the products take a Weight, which carries the precision
  const auto W = la::Weight<const float>(TensorView<const float, 2>(w, {N, K})).with_precision(p);
  if (which == 0)
    la::linear_forward<float>(TensorView<float, 2>(out, {M, N}), TensorView<const float, 2>(in, {M, K}), W);
  else if (which == 1)
    la::linear_backward_input<float>(TensorView<float, 2>(out, {M, K}), TensorView<const float, 2>(in, {M, N}), W);
#else  // headers whose products take the matrix and the precision apart
  if (which == 0)
    la::linear_forward<float>(TensorView<float, 2>(out, {M, N}), TensorView<const float, 2>(in, {M, K}),
                              TensorView<const float, 2>(w, {N, K}), {}, {}, p);
  else if (which == 1)
    la::linear_backward_input<float>(TensorView<float, 2>(out, {M, K}), TensorView<const float, 2>(in, {M, N}),
                                     TensorView<const float, 2>(w, {N, K}), p);
#endif
  else
    la::linear_backward_weight<float>(TensorView<float, 2>(out, {N, K}), TensorView<const float, 2>(in, {M, N}),
                                      TensorView<const float, 2>(w, {M, K}), nullptr, p);
}
