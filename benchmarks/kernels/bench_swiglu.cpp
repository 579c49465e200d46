// SwiGLU's elementwise middle at Qwen2.5-0.5B's shape [512, 4864] (T = 512 tokens, F = 4864),
// float and double, 1 and 2 threads: the forward a = silu(g)⊙u and the backward
// (dg += da·u·silu'(g), du += da·silu(g)) as the library runs them (nn::SwiGLU::activate and
// activate_backward: expression templates, chunked, the exponentials from exp_float in float),
// against a naive scalar loop of the same formula measured in the same run, and in float
// against a hand-written loop over exp_float's chunks (for_each_exp_chunk). Every loop is split
// over the same threads (parallel_chunks). Before timing, the program checks that the library's
// float results have the naive loop's bits and the chunk loop's.
//
//   build/bin/bench_swiglu            (prints elements/s, then the ratios of wall time and of the
//                                      main thread's CPU time)
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"

#include <causalqwen/simd/exp_float.hpp>
#include <causalqwen/core/threading.hpp>
#include <causalqwen/nn/swiglu.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cq = causalqwen;

namespace {

constexpr std::size_t k_tokens = 512, k_ffn = 4864, k_n = k_tokens * k_ffn;

template <class T>
struct Data {
  std::vector<T> g, u, a, da, dg, du;
  typename cq::nn::SwiGLU<T>::Cache cache;
  typename cq::nn::SwiGLU<T>::Workspace work;
  Data() : g(k_n), u(k_n), a(k_n), da(k_n), dg(k_n, T(0)), du(k_n, T(0)) {
    std::mt19937_64 rng(1);  // fixed data: g ~ N(0, 2²), u, da ~ N(0, 1)
    std::normal_distribution<double> wide(0.0, 2.0), unit(0.0, 1.0);
    for (std::size_t i = 0; i < k_n; ++i) {
      g[i] = static_cast<T>(wide(rng));
      u[i] = static_cast<T>(unit(rng));
      da[i] = static_cast<T>(unit(rng));
    }
    const auto view = [](std::vector<T>& v) { return cq::TensorView<T, 2>{v.data(), {k_tokens, k_ffn}}; };
    cache.g = view(g);
    cache.u = view(u);
    cache.a = view(a);
    work.da = view(da);
    work.dg = view(dg);
    work.du = view(du);
  }
};

template <class T>
Data<T>& data() {
  static Data<T> d;
  return d;
}

/// The naive loops: a = g/(1 + e^{−g})·u; σ = 1/(1 + e^{−g}), dg += (da·u)·σ(1 + g(1 − σ)),
/// du += da·silu(g).
template <class T>
void naive_forward(Data<T>& d) {
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) d.a[i] = d.g[i] / (T(1) + std::exp(-d.g[i])) * d.u[i];
  });
}
template <class T>
void naive_backward(Data<T>& d) {
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const T x = d.g[i], up = d.da[i], s = T(1) / (T(1) + std::exp(-x));
      d.dg[i] += (up * d.u[i]) * (s * (T(1) + x * (T(1) - s)));
      d.du[i] += up * (x / (T(1) + std::exp(-x)));
    }
  });
}

/// The same formulas by hand over exp_float's chunks of 256 (float).
void chunk_loop_forward(Data<float>& d) {
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t end) {
    const float *g = d.g.data() + b, *u = d.u.data() + b;
    float* a = d.a.data() + b;
    cq::for_each_exp_chunk(g, end - b, [](float x) { return -x; }, [&](std::size_t i0, std::size_t m, const float* e) {
      for (std::size_t i = 0; i < m; ++i) a[i0 + i] = g[i0 + i] / (1.0f + e[i]) * u[i0 + i];
    });
  });
}
void chunk_loop_backward(Data<float>& d) {
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t end) {
    const float *g = d.g.data() + b, *u = d.u.data() + b, *da = d.da.data() + b;
    float *dg = d.dg.data() + b, *du = d.du.data() + b;
    cq::for_each_exp_chunk(g, end - b, [](float x) { return -x; }, [&](std::size_t i0, std::size_t m, const float* e) {
      for (std::size_t i = 0; i < m; ++i) {
        const float x = g[i0 + i], up = da[i0 + i];
        const float s = 1.0f / (1.0f + e[i]);
        dg[i0 + i] += (up * u[i0 + i]) * (s * (1.0f + x * (1.0f - s)));
        du[i0 + i] += up * (x / (1.0f + e[i]));
      }
    });
  });
}

/// The expression's scalar interface, one element at a time: a[i] = e.at(i), e.backprop_at(i, da[i]).
template <class T>
void elementwise_forward(Data<T>& d) {
  using namespace cq::autodiff;
  const auto e = silu(constant(d.cache.g)) * constant(d.cache.u);
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t end) {
    for (std::size_t i = b; i < end; ++i) d.a[i] = e.at(i);
  });
}
template <class T>
void elementwise_backward(Data<T>& d) {
  using namespace cq::autodiff;
  const auto e = silu(var(d.cache.g, d.work.dg)) * var(d.cache.u, d.work.du);
  cq::parallel_chunks(k_n, [&](std::size_t b, std::size_t end) {
    for (std::size_t i = b; i < end; ++i) e.backprop_at(i, d.da[i]);
  });
}

template <class T>
void library_forward(Data<T>& d) {
  cq::nn::SwiGLU<T>::activate(d.cache);
}
template <class T>
void library_backward(Data<T>& d) {
  cq::nn::SwiGLU<T>::activate_backward(d.cache, d.work);
}

template <class T, void (*F)(Data<T>&)>
void bench(benchmark::State& state) {
  cq::set_threads(static_cast<std::size_t>(state.range(0)));
  Data<T>& d = data<T>();
  for (auto _ : state) {
    F(d);
    benchmark::DoNotOptimize(d.a.data());
    benchmark::DoNotOptimize(d.dg.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * k_n));
}

/// Whether f and g leave a, dg and du with the same bits (from zeroed gradients).
template <class T>
bool same_results(void (*f)(Data<T>&), void (*g)(Data<T>&)) {
  Data<T>& d = data<T>();
  std::vector<T> out[2][3];
  int k = 0;
  for (auto run : {f, g}) {
    std::fill(d.dg.begin(), d.dg.end(), T(0));
    std::fill(d.du.begin(), d.du.end(), T(0));
    run(d);
    out[k][0] = d.a, out[k][1] = d.dg, out[k][2] = d.du;
    ++k;
  }
  for (int j = 0; j < 3; ++j)
    if (std::memcmp(out[0][j].data(), out[1][j].data(), k_n * sizeof(T)) != 0) return false;
  return true;
}

template <class T, void (*Fwd)(Data<T>&), void (*Bwd)(Data<T>&)>
void both(Data<T>& d) {
  Fwd(d);
  Bwd(d);
}

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  cqbench::CpuRatioReporter reporter;
  const auto add = [&](const std::string& name, auto fn, bool baseline_pair, const std::string& baseline) {
    for (const int threads : {1, 2}) {
      const std::string t = "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark((name + t).c_str(), fn)->Arg(threads)->UseRealTime()->Unit(benchmark::kMillisecond);
      // Google Benchmark names the run "<name>/<arg>/real_time"
      const std::string suffix = t + "/" + std::to_string(threads) + "/real_time";
      if (baseline_pair) reporter.add_both(name + suffix, baseline + suffix);
    }
  };
  add("forward/float/naive", bench<float, naive_forward<float>>, false, "");
  add("forward/float/elementwise", bench<float, elementwise_forward<float>>, false, "");
  add("forward/float/chunk_loop", bench<float, chunk_loop_forward>, false, "");
  add("forward/float/library", bench<float, library_forward<float>>, true, "forward/float/naive");
  add("forward/double/naive", bench<double, naive_forward<double>>, false, "");
  add("forward/double/elementwise", bench<double, elementwise_forward<double>>, false, "");
  add("forward/double/library", bench<double, library_forward<double>>, true, "forward/double/naive");
  add("backward/float/naive", bench<float, naive_backward<float>>, false, "");
  add("backward/float/elementwise", bench<float, elementwise_backward<float>>, false, "");
  add("backward/float/chunk_loop", bench<float, chunk_loop_backward>, false, "");
  add("backward/float/library", bench<float, library_backward<float>>, true, "backward/float/naive");
  add("backward/double/naive", bench<double, naive_backward<double>>, false, "");
  add("backward/double/elementwise", bench<double, elementwise_backward<double>>, false, "");
  add("backward/double/library", bench<double, library_backward<double>>, true, "backward/double/naive");
  for (const char* dir : {"forward", "backward"})
    for (const int threads : {1, 2}) {
      const std::string suffix = "/threads:" + std::to_string(threads) + "/" + std::to_string(threads) + "/real_time";
      const std::string p = std::string(dir);
      reporter.add_both(p + "/float/library" + suffix, p + "/float/chunk_loop" + suffix);
      reporter.add_both(p + "/float/library" + suffix, p + "/float/elementwise" + suffix);
      reporter.add_both(p + "/double/library" + suffix, p + "/double/elementwise" + suffix);
    }
  benchmark::Initialize(&argc, argv);

  const bool naive_bits = same_results<float>(both<float, library_forward<float>, library_backward<float>>,
                                              both<float, naive_forward<float>, naive_backward<float>>);
  const bool chunk_bits = same_results<float>(both<float, library_forward<float>, library_backward<float>>,
                                              both<float, chunk_loop_forward, chunk_loop_backward>);
  const bool double_bits = same_results<double>(both<double, library_forward<double>, library_backward<double>>,
                                                both<double, naive_forward<double>, naive_backward<double>>);
  fmt::print("SwiGLU middle over [{}, {}], exp_float on {}; the library's bits equal the naive loop's: float {}, "
             "double {}; the chunk loop's: float {}\n",
             k_tokens, k_ffn, cq::exp_float_path(), naive_bits ? "yes" : "NO", double_bits ? "yes" : "NO",
             chunk_bits ? "yes" : "NO");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  reporter.print_cpu_ratios();
  benchmark::Shutdown();
  return naive_bits && chunk_bits && double_bits ? 0 : 1;
}
