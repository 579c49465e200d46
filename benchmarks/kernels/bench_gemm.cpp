// GEMM throughput of causalqwen's linear wrappers (linalg::matmul: the library's own AVX-512
// float kernel on a CPU with AVX-512F, else Eigen over OpenBLAS, or Eigen's own kernels in the
// bench_gemm_eigen_native program) against OpenBLAS cblas_sgemm called directly, on its own
// threads, measured in the same run, at 1 and 2 threads: forward Y = X·Wᵀ and the backward
// products dX += dY·W, dW += dYᵀ·X, for the Qwen2.5-0.5B linear shapes with T = 512 tokens
// (`qwen0.5b`) and for the demo model's shapes (H 64, FFN 128, 1024 classes) with T = 1024
// tokens, one training batch of 16×64 (`demo`); no argument runs both.
//
//   OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 build/bin/bench_gemm [qwen0.5b|demo]
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"

#include <causalqwen/core/eigen_map.hpp>
#include <causalqwen/linalg/f32_gemm.hpp>
#include <causalqwen/linalg/gemm.hpp>

#include <cblas.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

namespace cq = causalqwen;
using cq::TensorView;

namespace {
struct LinearShape {
  const char* group;
  const char* name;
  std::size_t in, out, tokens;
};
// (tokens×in)·(out×in)ᵀ
constexpr LinearShape kShapes[] = {{"qwen0.5b", "q_o_proj_896x896", 896, 896, 512},
                                   {"qwen0.5b", "kv_proj_896x128", 896, 128, 512},
                                   {"qwen0.5b", "gate_up_896x4864", 896, 4864, 512},
                                   {"qwen0.5b", "down_4864x896", 4864, 896, 512},
                                   {"demo", "demo_qkv_64x128", 64, 128, 1024},
                                   {"demo", "demo_o_64x64", 64, 64, 1024},
                                   {"demo", "demo_gate_up_64x256", 64, 256, 1024},
                                   {"demo", "demo_down_128x64", 128, 64, 1024},
                                   {"demo", "demo_cls_64x1024", 64, 1024, 1024}};
enum class Product { forward, backward_input, backward_weight };
const char* product_name(Product p) {
  return p == Product::forward ? "fwd Y=XWt" : p == Product::backward_input ? "bwd dX+=dYW" : "bwd dW+=dYtX";
}

struct Buffers {
  std::vector<float> x, w, y, dx, dw;
  explicit Buffers(const LinearShape& s)
      : x(s.tokens * s.in), w(s.out * s.in), y(s.tokens * s.out), dx(s.tokens * s.in), dw(s.out * s.in) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0, 1);
    for (auto* v : {&x, &w, &y}) for (auto& e : *v) e = d(rng);
  }
};

void set_threads(int threads) {
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
  openblas_set_num_threads(threads);
}

void run_ours(benchmark::State& state, LinearShape s, Product p, int threads) {
  set_threads(threads);
  Buffers b(s);
  const std::size_t M = s.tokens, K = s.in, N = s.out;
  for (auto _ : state) {
    switch (p) {
      case Product::forward:
        cq::linalg::linear_forward<float>(TensorView<float, 2>(b.y.data(), {M, N}), TensorView<const float, 2>(b.x.data(), {M, K}),
                                          TensorView<const float, 2>(b.w.data(), {N, K}));
        break;
      case Product::backward_input:
        cq::linalg::linear_backward_input<float>(TensorView<float, 2>(b.dx.data(), {M, K}), TensorView<const float, 2>(b.y.data(), {M, N}),
                                                 TensorView<const float, 2>(b.w.data(), {N, K}));
        break;
      case Product::backward_weight:
        cq::linalg::linear_backward_weight<float>(TensorView<float, 2>(b.dw.data(), {N, K}), TensorView<const float, 2>(b.y.data(), {M, N}),
                                                  TensorView<const float, 2>(b.x.data(), {M, K}));
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * M * K * N));
  state.counters["GFLOP/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * M * K * N / 1e9, benchmark::Counter::kIsRate);
}

void run_openblas(benchmark::State& state, LinearShape s, Product p, int threads) {
  set_threads(threads);
  Buffers b(s);
  const int M = int(s.tokens), K = int(s.in), N = int(s.out);
  for (auto _ : state) {
    switch (p) {
      case Product::forward:  // Y[M,N] = X[M,K]·W[N,K]ᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, b.x.data(), K, b.w.data(), K, 0.0f, b.y.data(), N);
        break;
      case Product::backward_input:  // dX[M,K] += dY[M,N]·W[N,K]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, b.y.data(), N, b.w.data(), K, 1.0f, b.dx.data(), K);
        break;
      case Product::backward_weight:  // dW[N,K] += dY[M,N]ᵀ·X[M,K]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, b.y.data(), N, b.x.data(), K, 1.0f, b.dw.data(), K);
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * M * K * N);
  state.counters["GFLOP/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * M * K * N / 1e9, benchmark::Counter::kIsRate);
}
}  // namespace

/// "causalqwen-avx512" or "causalqwen-avx2": the library's float kernel on this CPU.
std::string kernel_label() { return cq::linalg::f32_kernel_name() == std::string("AVX-512") ? "causalqwen-avx512" : "causalqwen-avx2"; }

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  benchmark::Initialize(&argc, argv);
  const std::string only = argc > 1 ? argv[1] : "";
  if (!only.empty() && only != "qwen0.5b" && only != "demo") {
    fmt::print(stderr, "bench_gemm: unknown shape group '{}' (expected qwen0.5b or demo)\n", only);
    return 2;
  }
  cqbench::RatioReporter reporter;
#ifdef EIGEN_USE_BLAS
  const std::string ours = cq::linalg::f32_kernel_is_hardware() ? kernel_label() : "eigen+openblas";
#else
  const std::string ours = cq::linalg::f32_kernel_is_hardware() ? kernel_label() : "eigen";
#endif
  for (int threads : {1, 2})
    for (const auto& s : kShapes)
      for (Product p : {Product::forward, Product::backward_input, Product::backward_weight}) {
        if (!only.empty() && only != s.group) continue;
        const std::string tag = std::string(s.name) + " " + product_name(p) + " threads:" + std::to_string(threads);
        const std::string cand = ours + " " + tag, base = "openblas " + tag;
        benchmark::RegisterBenchmark(cand.c_str(), run_ours, s, p, threads)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
        benchmark::RegisterBenchmark(base.c_str(), run_openblas, s, p, threads)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
        const std::string suffix = "/min_time:0.300/real_time";  // Google Benchmark appends the options
        reporter.add_pair(cand + suffix, base + suffix);
      }
  fmt::print("OpenBLAS: {}\n", openblas_get_config());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
}
