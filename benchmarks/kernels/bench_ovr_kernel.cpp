// The OvR BCE + gradient kernel over one row of 151,936 classes (Qwen2's vocabulary), one
// thread: the vectorised ovr_bce_row against a naive std::atan loop measured in the same run,
// and against the scalar stable formulas (to show what the vectorisation alone buys).
//
//   build/bin/bench_ovr_kernel            (prints elements/s and the ratios at the end)
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"

#include <causalqwen/cauchy.hpp>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

namespace {

constexpr std::size_t k_classes = 151936;

template <class T>
struct Row {
  std::vector<T> loc, scale, d_loc, d_scale;
  std::int64_t label = 4242;
  T threshold = T(10);
  Row() : loc(k_classes), scale(k_classes), d_loc(k_classes), d_scale(k_classes) {
    std::mt19937_64 rng(1);  // fixed data: loc ~ N(0, 5²), scale ~ γ·|W| ≈ 10·U(0.5, 2)
    std::normal_distribution<double> normal(0.0, 5.0);
    std::uniform_real_distribution<double> uni(0.5, 2.0);
    for (std::size_t k = 0; k < k_classes; ++k) {
      loc[k] = static_cast<T>(normal(rng));
      scale[k] = static_cast<T>(10.0 * uni(rng));
    }
  }
};

/// The naive loop: P = ½ + atan(z)/π, BCE = −log P or −log(1 − P), gradients by the chain rule.
template <class T>
T naive_row(Row<T>& r) {
  T loss = 0;
  for (std::size_t k = 0; k < k_classes; ++k) {
    const T z = (r.loc[k] - r.threshold) / r.scale[k];
    const T p = T(0.5) + std::atan(z) / std::numbers::pi_v<T>;
    const T dp_dz = T(1) / (std::numbers::pi_v<T> * (T(1) + z * z));
    T dl_dz;
    if (static_cast<std::int64_t>(k) == r.label) {
      loss -= std::log(p);
      dl_dz = -dp_dz / p;
    } else {
      loss -= std::log(T(1) - p);
      dl_dz = dp_dz / (T(1) - p);
    }
    r.d_loc[k] = dl_dz / r.scale[k];
    r.d_scale[k] = -dl_dz * z / r.scale[k];
  }
  return loss;
}

/// The stable scalar formulas, one class at a time.
template <class T>
T scalar_stable_row(Row<T>& r) {
  T loss = 0;
  for (std::size_t k = 0; k < k_classes; ++k) {
    const auto g = cq::raw::ovr_bce_grad(T(static_cast<std::int64_t>(k) == r.label), r.loc[k], r.scale[k], r.threshold);
    loss += g.value;
    r.d_loc[k] = g.d_loc;
    r.d_scale[k] = g.d_scale;
  }
  return loss;
}

template <class T>
T kernel_row(Row<T>& r) {
  return cq::ovr_bce_row<T>(r.loc, r.scale, cq::RowThresholds<T>::scalar(r.threshold), r.label, T(1),
                            {r.d_loc.data(), r.d_scale.data(), nullptr});
}

template <class T, T (*F)(Row<T>&)>
void bench(benchmark::State& state) {
  Row<T> row;
  for (auto _ : state) {
    T loss = F(row);
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * k_classes));
}

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  benchmark::RegisterBenchmark("ovr_bce_row/float/naive_std_atan", bench<float, naive_row<float>>);
  benchmark::RegisterBenchmark("ovr_bce_row/float/scalar_stable", bench<float, scalar_stable_row<float>>);
  benchmark::RegisterBenchmark("ovr_bce_row/float/xsimd_kernel", bench<float, kernel_row<float>>);
  benchmark::RegisterBenchmark("ovr_bce_row/double/naive_std_atan", bench<double, naive_row<double>>);
  benchmark::RegisterBenchmark("ovr_bce_row/double/scalar_stable", bench<double, scalar_stable_row<double>>);
  benchmark::RegisterBenchmark("ovr_bce_row/double/xsimd_kernel", bench<double, kernel_row<double>>);
  benchmark::Initialize(&argc, argv);
  cqbench::RatioReporter reporter;
  for (const char* t : {"float", "double"}) {
    const std::string p = std::string("ovr_bce_row/") + t;
    reporter.add_pair(p + "/xsimd_kernel", p + "/naive_std_atan");
    reporter.add_pair(p + "/xsimd_kernel", p + "/scalar_stable");
  }
  fmt::print("OvR BCE + gradient over one row of {} classes, 1 thread, xsimd batch of {} floats\n",
             k_classes, xsimd::batch<float>::size);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
