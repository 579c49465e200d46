// The bf16 product of a linear layer, Y = bf16(X)·Wᵀ (linalg/bf16_gemm.hpp), on the
// Qwen2.5-0.5B linear shapes with M = 512 rows (a prefill) and M = 1 (a decoding step): "ours" as
// linear_forward runs it with a bf16 copy (on oneDNN's matmul where it runs AMX, from
// onednn_min_rows rows: linalg/kernels/onednn_bf16.hpp) and "own" (our own kernels,
// bf16_linear_forward with set_bf16_kernel(own)), against, in the same run:
//   - the float product the library runs otherwise (linalg::linear_forward: OpenBLAS sgemm for
//     M = 512, the few-rows kernel for M = 1), the baseline of every ratio;
//   - oneDNN's bf16 matmul (when libdnnl is found at configure time): X reordered to bf16 at every
//     call, as ours rounds it, W reordered once to the layout the primitive asks for, float Y;
//   - the bf16 and float multiply-add peaks of this CPU (benchmarks/common/peak.hpp).
// A second table times the three products of mixed-precision training (bf16_matmul, or oneDNN's
// where it runs AMX (linalg/kernels/onednn_bf16.hpp), through
// linear_forward / linear_backward_input / linear_backward_weight with Format::bf16: both
// operands rounded and packed at every call) against the same three in float, for M = 128 and
// M = 512 tokens.
// A third table times one layer's attention over a prompt (nn::CausalSelfAttention through a
// KV cache, the Qwen2.5-0.5B heads: 14 query heads, 2 KV heads of 64) with its products in float
// and in bf16 (bf16_products, as beside bf16 or int8 weights, the cache then in bf16), for 512 and
// 4,096 tokens; a fourth, one decoding step's attention after a prompt of 512, 4,096 and 16,384
// tokens, likewise.
// Each figure is the median of 9 timed calls after 2 untimed ones.
//
//   OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 build/bin/bench_bf16_gemm [THREADS=2]
#include "common/thread_settings.hpp"
#include "common/peak.hpp"

#include <causalqwen/linalg/bf16_gemm.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <causalqwen/linalg/kernels/onednn_bf16.hpp>
#include <causalqwen/nn/attention.hpp>

#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#ifdef CQ_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;

namespace {

struct Shape {
  const char* name;
  std::size_t k, n;  // X [M,K], W [N,K]
};
constexpr Shape shapes[] = {{"q|k|v 896 -> 1152", 896, 1152},
                            {"o 896 -> 896", 896, 896},
                            {"gate, up 896 -> 4864", 896, 4864},
                            {"down 4864 -> 896", 4864, 896}};

template <class F>
double median_seconds(F&& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < 9; ++i) {
    const double t0 = cqbench::seconds_now();
    f();
    t.push_back(cqbench::seconds_now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#ifdef CQ_BENCH_ONEDNN
/// oneDNN's bf16 matmul for Y [M,N] = X [M,K]·W [N,K]ᵀ: X (float) reordered to bf16 per call.
struct OneDnnBf16 {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul matmul;
  dnnl::reorder to_bf16;
  dnnl::memory x_f32, x_bf16, w, y;
  OneDnnBf16(std::size_t M, std::size_t K, std::size_t N, const float* w_f32, float* y_data, float* x_data) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::dim m = dnnl::memory::dim(M), k = dnnl::memory::dim(K), n = dnnl::memory::dim(N);
    const dnnl::memory::desc x_md({m, k}, dt::bf16, tag::ab), w_any({k, n}, dt::bf16, tag::any), y_md({m, n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_any, y_md), engine);
    matmul = dnnl::matmul(pd);
    x_f32 = dnnl::memory({{m, k}, dt::f32, tag::ab}, engine, x_data);
    x_bf16 = dnnl::memory(x_md, engine);
    to_bf16 = dnnl::reorder(x_f32, x_bf16);
    dnnl::memory w_plain({{k, n}, dt::f32, tag::ba}, engine, const_cast<float*>(w_f32));  // W [N,K] = Wᵀ [K,N] as 'ba'
    w = dnnl::memory(pd.weights_desc(), engine);
    dnnl::reorder(w_plain, w).execute(stream, w_plain, w);
    y = dnnl::memory(y_md, engine, y_data);
    stream.wait();
  }
  void run() {
    to_bf16.execute(stream, x_f32, x_bf16);
    matmul.execute(stream, {{DNNL_ARG_SRC, x_bf16}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
    stream.wait();
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  cq::set_threads(static_cast<std::size_t>(threads));
  const double bf16_peak = cqbench::bf16_dot_peak(), f32_peak = cqbench::float_fma_peak();
  // the peak of the instructions our products run on: vdpbf16ps, or float FMAs on AVX2
  const double our_peak = la::bf16_kernel_isa() == la::Bf16Isa::avx512_bf16 ? bf16_peak : f32_peak;
  fmt::print("threads {}; bf16 products of many rows run on: {}; our own kernels: {}\n", threads, la::bf16_kernel_name(),
             la::bf16_own_kernel_name());
  fmt::print("multiply-add peak: float FMA {:.0f} GFLOP/s, bf16 vdpbf16ps {:.0f} GFLOP/s (0: not on this CPU)\n\n",
             f32_peak / 1e9, bf16_peak / 1e9);
  fmt::print("{:<22} {:>4} {:>11} {:>11} {:>11} {:>11} {:>10} {:>11} {:>10}\n", "shape", "M", "float GF/s", "ours GF/s",
             "own GF/s", "oneDNN GF/s", "ours/float", "ours/oneDNN", "own/peak");
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& s : shapes)
    for (const std::size_t M : {std::size_t{512}, std::size_t{1}}) {
      std::vector<float> x(M * s.k), w(s.n * s.k), y(M * s.n);
      for (auto& v : x) v = normal(rng);
      for (auto& v : w) v = 0.05f * normal(rng);
      const la::PackedMatrix packed(la::Format::bf16, TensorView<const float, 2>(w.data(), {s.n, s.k}));
      const TensorView<const float, 2> xv(x.data(), {M, s.k}), wv(w.data(), {s.n, s.k});
      const TensorView<float, 2> yv(y.data(), {M, s.n});
      const double flops = 2.0 * double(M) * double(s.n) * double(s.k);
      const double t_float = median_seconds([&] { la::linear_forward<float>(yv, xv, wv); });
      const double t_ours = median_seconds([&] { la::linear_forward<float>(yv, xv, la::Weight<const float>(wv).with_decode(packed.ref())); });
      la::set_bf16_kernel(la::Bf16Kernel::own);
      const double t_own = median_seconds([&] { la::bf16_linear_forward(yv, xv, packed.ref()); });
      la::set_bf16_kernel(la::Bf16Kernel::automatic);
      double t_dnnl = 0;
#ifdef CQ_BENCH_ONEDNN
      try {  // oneDNN offers no bf16 matmul on a CPU without AVX-512
        OneDnnBf16 dnnl_mm(M, s.k, s.n, w.data(), y.data(), x.data());
        t_dnnl = median_seconds([&] { dnnl_mm.run(); });
      } catch (const dnnl::error&) {
        t_dnnl = 0;
      }
#endif
      fmt::print("{:<22} {:>4} {:>11.0f} {:>11.0f} {:>11.0f} {:>11.0f} {:>9.2f}x {:>10.2f}x {:>10.2f}\n", s.name, M,
                 flops / t_float / 1e9, flops / t_ours / 1e9, flops / t_own / 1e9, t_dnnl > 0 ? flops / t_dnnl / 1e9 : 0.0,
                 t_float / t_ours, t_dnnl > 0 ? t_dnnl / t_ours : 0.0, our_peak > 0 ? flops / t_own / our_peak : 0.0);
    }
  fmt::print("\nfew rows: our own kernels against oneDNN's bf16 matmul (the oneDNN-backed product's threshold: {} rows); "
             "microseconds\n{:<22}", la::onednn_min_rows, "shape");
  const std::size_t few_rows[] = {2, 4, 8, 12, 16, 24, 32, 64};
  for (const std::size_t M : few_rows) fmt::print(" {:>13}", fmt::format("M={} own/dnnl", M));
  fmt::print("\n");
  for (const auto& s : shapes) {
    fmt::print("{:<22}", s.name);
    for (const std::size_t M : few_rows) {
      std::vector<float> x(M * s.k), w(s.n * s.k), y(M * s.n);
      for (auto& v : x) v = normal(rng);
      for (auto& v : w) v = 0.05f * normal(rng);
      const la::PackedMatrix packed(la::Format::bf16, TensorView<const float, 2>(w.data(), {s.n, s.k}));
      const TensorView<const float, 2> xv(x.data(), {M, s.k}), wv(w.data(), {s.n, s.k});
      const TensorView<float, 2> yv(y.data(), {M, s.n});
      la::set_bf16_kernel(la::Bf16Kernel::own);
      const double t_own = median_seconds([&] { la::linear_forward<float>(yv, xv, la::Weight<const float>(wv).with_decode(packed.ref())); });
      la::set_bf16_kernel(la::Bf16Kernel::automatic);
      double t_dnnl = 0;
#ifdef CQ_BENCH_ONEDNN
      try {
        OneDnnBf16 dnnl_mm(M, s.k, s.n, w.data(), y.data(), x.data());
        t_dnnl = median_seconds([&] { dnnl_mm.run(); });
      } catch (const dnnl::error&) {
        t_dnnl = 0;
      }
#endif
      fmt::print(" {:>13}", fmt::format("{:.0f}/{:.0f}", t_own * 1e6, t_dnnl * 1e6));
    }
    fmt::print("\n");
  }
  fmt::print("\n(float: linalg::linear_forward over the float W; oneDNN 0: not built with libdnnl, or no bf16 matmul of oneDNN's on this CPU; M = 1 is bound by reading W)\n");

  fmt::print("\nmixed-precision training products, bf16 (operands rounded and packed in each call) against float; "
             "GFLOP/s, ratio = float time / bf16 time\n");
  fmt::print("{:<22} {:>4} {:>17} {:>17} {:>17} {:>8}\n", "shape", "M", "Y = X.W^T", "dX = dY.W", "dW += dY^T.X", "all 3");
  for (const auto& s : shapes)
    for (const std::size_t M : {std::size_t{128}, std::size_t{512}}) {
      std::vector<float> x(M * s.k), w(s.n * s.k), y(M * s.n), dy(M * s.n), dx(M * s.k), dw(s.n * s.k);
      for (auto& v : x) v = normal(rng);
      for (auto& v : dy) v = normal(rng);
      for (auto& v : w) v = 0.05f * normal(rng);
      const TensorView<const float, 2> xv(x.data(), {M, s.k}), wv(w.data(), {s.n, s.k}), dyv(dy.data(), {M, s.n});
      const double flops = 2.0 * double(M) * double(s.n) * double(s.k);
      double t[2][3];
      for (const auto p : {la::Format::f32, la::Format::bf16}) {
        const int i = p == la::Format::bf16;
        const auto W = la::Weight<const float>(wv).with_precision(p);
        t[i][0] = median_seconds([&] { la::linear_forward<float>({y.data(), {M, s.n}}, xv, W); });
        t[i][1] = median_seconds([&] { la::linear_backward_input<float>({dx.data(), {M, s.k}}, dyv, W); });
        t[i][2] = median_seconds([&] { la::linear_backward_weight<float>({dw.data(), {s.n, s.k}}, dyv, xv, nullptr, p); });
      }
      const auto cell = [&](int j) { return fmt::format("{:>5.0f}/{:<5.0f} {:>4.2f}x", flops / t[0][j] / 1e9, flops / t[1][j] / 1e9, t[0][j] / t[1][j]); };
      fmt::print("{:<22} {:>4} {:>17} {:>17} {:>17} {:>7.2f}x\n", s.name, M, cell(0), cell(1), cell(2),
                 (t[0][0] + t[0][1] + t[0][2]) / (t[1][0] + t[1][1] + t[1][2]));
    }
  fmt::print("(each cell: float GFLOP/s / bf16 GFLOP/s, and the speed-up)\n");

  fmt::print("\nattention of one layer over a prompt (14 heads, 2 KV heads of 64, through a KV cache), float "
             "against bf16 products\n");
  fmt::print("{:>6} {:>10} {:>10} {:>11} {:>11} {:>10}\n", "tokens", "float ms", "bf16 ms", "float GF/s", "bf16 GF/s",
             "float/bf16");
  cq::nn::CausalSelfAttention<float> attention{14, 2, 64};
  for (const std::size_t S : {std::size_t{512}, std::size_t{4096}}) {
    std::vector<float> qkv(S * attention.qkv_width()), out(S * attention.q_width());
    for (auto& v : qkv) v = normal(rng);
    cq::nn::KvCache<float> kv;
    cq::nn::CausalSelfAttention<float>::Workspace workspace;
    const auto prefill = [&](bool bf16) {
      attention.bf16_products = bf16;
      kv.use_storage(bf16 ? cq::nn::KvStorage::bf16 : cq::nn::KvStorage::f32);
      kv.reset(1, 1, attention.num_kv_heads, attention.head_dim, S);
      std::fill_n(kv.mask.begin(), S, std::int64_t{1});
      attention.forward_cached(0, qkv.data(), 1, S, kv, out.data(), workspace);
    };
    // Q·Kᵀ and P·V over the keys up to each 64-token block's end, for every query head
    double flops = 0;
    for (std::size_t i0 = 0; i0 < S; i0 += 64) flops += 2 * 2.0 * 14 * double(std::min<std::size_t>(64, S - i0)) * double(std::min(S, i0 + 64)) * 64;
    const double t_float = median_seconds([&] { prefill(false); }), t_bf16 = median_seconds([&] { prefill(true); });
    fmt::print("{:>6} {:>10.2f} {:>10.2f} {:>11.0f} {:>11.0f} {:>9.2f}x\n", S, t_float * 1e3, t_bf16 * 1e3,
               flops / t_float / 1e9, flops / t_bf16 / 1e9, t_float / t_bf16);
  }
  fmt::print("(GFLOP/s counts Q.K^T and P.V over the keys each 64-token block of queries reads)\n");

  fmt::print("\none decoding step's attention in one layer after a prompt of L tokens (the same heads; the new "
             "token's key and value appended to the cache), float against bf16 products\n");
  fmt::print("{:>6} {:>10} {:>10} {:>13} {:>13} {:>10}\n", "L", "float us", "bf16 us", "float KV MB", "bf16 KV MB",
             "float/bf16");
  for (const std::size_t L : {std::size_t{512}, std::size_t{4096}, std::size_t{16384}}) {
    std::vector<float> qkv((L + 1) * attention.qkv_width()), out((L + 1) * attention.q_width());
    for (auto& v : qkv) v = normal(rng);
    cq::nn::KvCache<float> kv;
    cq::nn::CausalSelfAttention<float>::Workspace workspace;
    double t[2], kv_mb[2];
    for (const bool bf16 : {false, true}) {
      attention.bf16_products = bf16;
      kv.use_storage(bf16 ? cq::nn::KvStorage::bf16 : cq::nn::KvStorage::f32);
      kv.reset(1, 1, attention.num_kv_heads, attention.head_dim, L + 1);
      std::fill_n(kv.mask.begin(), L + 1, std::int64_t{1});
      attention.forward_cached(0, qkv.data(), 1, L, kv, out.data(), workspace);  // the prompt
      kv.length = L;
      constexpr int steps = 20;  // steps per timed call, each undone (the cache back to L tokens)
      t[bf16] = median_seconds([&] {
                  for (int s = 0; s < steps; ++s) {
                    attention.forward_cached(0, qkv.data() + L * attention.qkv_width(), 1, 1, kv, out.data(), workspace);
                    kv.length = L;
                  }
                }) /
                steps;
      kv_mb[bf16] = double(kv.bytes()) / 1e6;
    }
    fmt::print("{:>6} {:>10.1f} {:>10.1f} {:>13.2f} {:>13.2f} {:>9.2f}x\n", L, t[0] * 1e6, t[1] * 1e6, kv_mb[0], kv_mb[1],
               t[0] / t[1]);
  }
  fmt::print("(KV MB: the layer's cache, keys, values and mask)\n");
  return 0;
}
