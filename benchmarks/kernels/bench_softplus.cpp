// The abduction's elementwise scale step in float at the Qwen2.5-0.5B width F = 4864, for a
// training batch [512, 4864] and one decoding row [1, 4864], 1 and 2 threads: the forward
// scale = softplus(pre) and the backward d_pre = d_scale·σ(pre) as the library runs them
// (model::Abduction::activate and activate_backward: expression templates, chunked, e^{−|x|} from
// exp_float and its log1p from log1p_unit_float), against the hand-written loops over exp_float's
// chunks (for_each_exp_chunk) the abduction ran before, measured in the same run. Both sides write
// their output beside their input (the library's backward runs in place in the model; here an
// in-place σ product repeated would drive d towards the subnormals). Every loop is split over the
// same threads (parallel_chunks). Before timing, the program checks that the library's results
// have the hand-written loops' bits.
//
//   build/bin/bench_softplus          (prints elements/s, then the ratios of wall time and of the
//                                      main thread's CPU time)
#include "common/bench_ratio.hpp"
#include "common/thread_settings.hpp"

#include <causalqwen/core/threading.hpp>
#include <causalqwen/model/abduction.hpp>
#include <causalqwen/simd/exp_float.hpp>
#include <causalqwen/simd/log1p_float.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cq = causalqwen;

namespace {

constexpr std::size_t k_width = 4864;

struct Data {
  std::size_t rows;
  std::vector<float> pre, scale, d_scale, d_pre;
  explicit Data(std::size_t m) : rows(m), pre(m * k_width), scale(m * k_width), d_scale(m * k_width), d_pre(m * k_width) {
    std::mt19937_64 rng(1);  // fixed data: pre ~ N(2, 4²) (both signs, both log1p branches), d ~ N(0, 1)
    std::normal_distribution<double> wide(2.0, 4.0), unit(0.0, 1.0);
    for (std::size_t i = 0; i < pre.size(); ++i) {
      pre[i] = static_cast<float>(wide(rng));
      d_scale[i] = static_cast<float>(unit(rng));
    }
  }
  std::size_t size() const { return pre.size(); }
  cq::TensorView<const float, 2> view(const std::vector<float>& v) const { return {v.data(), {rows, k_width}}; }
  cq::TensorView<float, 2> view(std::vector<float>& v) { return {v.data(), {rows, k_width}}; }
};

Data& data(std::size_t rows) {
  static Data batch(512), row(1);
  return rows == 1 ? row : batch;
}

/// The former loops: scale = max(pre, 0) + log1p(e^{−|pre|}), d_pre = d_scale·σ(pre) with
/// σ = 1/(1 + e) for pre ≥ 0 and e/(1 + e) below, e = e^{−|pre|}.
void loop_forward(Data& d) {
  cq::parallel_chunks(d.size(), [&](std::size_t b, std::size_t end) {
    const float* x = d.pre.data() + b;
    float* y = d.scale.data() + b;
    cq::for_each_exp_chunk(x, end - b, [](float v) { return -std::fabs(v); }, [&](std::size_t i0, std::size_t m, float* w) {
      cq::log1p_unit_float(w, w, m);
      for (std::size_t i = 0; i < m; ++i) y[i0 + i] = std::fmax(x[i0 + i], 0.0f) + w[i];
    });
  });
}
void loop_backward(Data& d) {
  cq::parallel_chunks(d.size(), [&](std::size_t b, std::size_t end) {
    const float *x = d.pre.data() + b, *ds = d.d_scale.data() + b;
    float* dp = d.d_pre.data() + b;
    cq::for_each_exp_chunk(x, end - b, [](float v) { return -std::fabs(v); }, [&](std::size_t i0, std::size_t m, const float* w) {
      for (std::size_t i = 0; i < m; ++i) {
        const float e = w[i];
        dp[i0 + i] = ds[i0 + i] * (x[i0 + i] >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e));
      }
    });
  });
}

void library_forward(Data& d) { cq::model::Abduction<float>::activate(d.view(d.pre), d.view(d.scale)); }
void library_backward(Data& d) {
  cq::model::Abduction<float>::activate_backward(d.view(d.pre), d.view(d.d_scale), d.view(d.d_pre));
}

template <void (*F)(Data&)>
void bench(benchmark::State& state) {
  cq::set_threads(static_cast<std::size_t>(state.range(0)));
  Data& d = data(static_cast<std::size_t>(state.range(1)));
  for (auto _ : state) {
    F(d);
    benchmark::DoNotOptimize(d.scale.data());
    benchmark::DoNotOptimize(d.d_pre.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
}

/// Whether the library and the former loops leave scale and d_pre with the same bits.
bool same_results(std::size_t rows) {
  Data& d = data(rows);
  std::vector<float> out[2][2];
  int k = 0;
  using Step = void (*)(Data&);
  const std::pair<Step, Step> sides[] = {{library_forward, library_backward}, {loop_forward, loop_backward}};
  for (const auto& [fwd, bwd] : sides) {
    std::fill(d.scale.begin(), d.scale.end(), -1.0f);
    std::fill(d.d_pre.begin(), d.d_pre.end(), -1.0f);
    fwd(d);
    bwd(d);
    out[k][0] = d.scale, out[k][1] = d.d_pre;
    ++k;
  }
  for (int j = 0; j < 2; ++j)
    if (std::memcmp(out[0][j].data(), out[1][j].data(), d.size() * sizeof(float)) != 0) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  cqbench::CpuRatioReporter reporter;
  for (const char* dir : {"forward", "backward"}) {
    const bool fwd = std::string(dir) == "forward";
    for (const std::size_t rows : {std::size_t{512}, std::size_t{1}})
      for (const int threads : {1, 2}) {
        // Google Benchmark names the run "<name>/<arg0>/<arg1>/real_time"
        const std::string shape = "/[" + std::to_string(rows) + "," + std::to_string(k_width) + "]/threads:" +
                                  std::to_string(threads);
        const std::string suffix = shape + "/" + std::to_string(threads) + "/" + std::to_string(rows) + "/real_time";
        const std::string loop = std::string(dir) + "/float/loop", library = std::string(dir) + "/float/library";
        benchmark::RegisterBenchmark((loop + shape).c_str(), fwd ? bench<loop_forward> : bench<loop_backward>)
            ->Args({threads, static_cast<std::int64_t>(rows)})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((library + shape).c_str(), fwd ? bench<library_forward> : bench<library_backward>)
            ->Args({threads, static_cast<std::int64_t>(rows)})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        reporter.add_both(library + suffix, loop + suffix);
      }
  }
  benchmark::Initialize(&argc, argv);

  const bool batch_bits = same_results(512), row_bits = same_results(1);
  fmt::print("abduction scale step (softplus, d·σ) in float, exp_float on {}, log1p_unit_float {}; the library's bits "
             "equal the former loops': [512, {}] {}, [1, {}] {}\n",
             cq::exp_float_path(), cq::log1p_unit_float_is_vectorised() ? "16 at a time" : "scalar", k_width,
             batch_bits ? "yes" : "NO", k_width, row_bits ? "yes" : "NO");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  reporter.print_cpu_ratios();
  benchmark::Shutdown();
  return batch_bits && row_bits ? 0 : 1;
}
