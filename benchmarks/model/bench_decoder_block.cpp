// One Qwen2.5-0.5B-shaped decoder block (H 896, 14 heads, 2 KV heads, FFN 4864), float32,
// B = 1, S = 128 and 512: forward and forward+backward against the same block in PyTorch
// (benchmarks/peers/decoder_block_torch.py, torch.set_num_threads(2)), run by this program in the
// same command. Memory: the bytes of our gradient + activation + scratch arenas, against the
// growth of PyTorch's peak RSS over its run (both after parameters and inputs exist).
//
//   OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE build-nn/bin/bench_decoder_block
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"
#include "common/usage_counters.hpp"

#include <causalqwen/nn.hpp>

#include <nlohmann/json.hpp>
#include <omp.h>

#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
using cq::TensorView;

namespace {
constexpr int kThreads = 2;

nn::TransformerConfig block_config() {
  auto c = nn::TransformerConfig::qwen2_5_0_5b();
  c.num_layers = 1;
  return c;
}

/// A block with its arenas for 1×S tokens.
struct Bench {
  nn::DecoderBlock<float> block{block_config()};
  std::size_t seq;
  cq::Arena<float> params, grads, acts, ws;
  nn::DecoderBlock<float>::Params p, g;
  nn::DecoderBlock<float>::Cache cache;
  nn::DecoderBlock<float>::Workspace work;
  nn::RotaryEmbedding<float>::Table rope;
  std::vector<float> x, y, dy, dx;

  explicit Bench(std::size_t s) : seq(s) {
    auto pl = std::make_shared<cq::Layout>();
    block.add_params(*pl, "");
    params.reset(pl);
    grads.reset(pl);
    std::mt19937_64 rng(0);
    std::normal_distribution<float> d(0, 0.02f);
    for (const auto& slot : pl->slots())
      for (auto& v : params.slot_span(slot.name)) v = slot.name.find("layernorm") != std::string::npos ? 1.0f : d(rng);
    auto al = std::make_shared<cq::Layout>();
    block.add_activations(*al, "", 1, seq);
    acts.reset(al);
    auto wl = std::make_shared<cq::Layout>();
    block.add_workspace(*wl, 1, seq);
    ws.reset(wl);
    p = block.bind_params(params, "");
    g = block.bind_params(grads, "");
    cache = block.bind_cache(acts, "", 1, seq);
    block.bind_workspace(ws, work);
    std::vector<std::int64_t> pos(seq);
    std::iota(pos.begin(), pos.end(), 0);
    block.rope().build(TensorView<const std::int64_t, 1>(pos.data(), {seq}), rope);
    std::normal_distribution<float> n(0, 1);
    x.resize(seq * 896), y.resize(seq * 896), dy.resize(seq * 896), dx.resize(seq * 896);
    for (auto& v : x) v = n(rng);
    for (auto& v : dy) v = n(rng);
  }
  void forward() {
    block.forward(p, TensorView<const float, 2>(x.data(), {seq, 896}), TensorView<float, 2>(y.data(), {seq, 896}), {}, rope, cache, work);
  }
  void backward() {
    grads.zero();
    std::fill(dx.begin(), dx.end(), 0.0f);
    block.backward(p, g, cache, TensorView<const float, 2>(dy.data(), {seq, 896}), TensorView<float, 2>(dx.data(), {seq, 896}), work);
  }
  double memory_bytes() const {
    return double(grads.bytes() + acts.bytes() + ws.bytes() +
                  (work.attn.q.capacity() + work.attn.o.capacity() + work.attn.dq.capacity() + work.attn.dp.capacity()) * sizeof(float));
  }
};

nlohmann::json run_torch(std::size_t seq) {
  const std::string cmd = std::string("/usr/bin/python3 ") + CQ_TORCH_BLOCK_SCRIPT + " " + std::to_string(seq) + " " +
                          std::to_string(kThreads) + (seq > 256 ? " 7" : " 15");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  while (pipe && fgets(buf, sizeof buf, pipe.get())) out += buf;
  return nlohmann::json::parse(out.substr(out.find('{')));
}
}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  benchmark::Initialize(&argc, argv);
  omp_set_num_threads(kThreads);
  Eigen::setNbThreads(kThreads);
  cqbench::RatioReporter reporter;
  std::vector<std::unique_ptr<Bench>> benches;
  for (std::size_t seq : {128, 512}) {
    const auto torch = run_torch(seq);
    fmt::print("PyTorch {} (S={}): forward {:.2f} ms, forward+backward {:.2f} ms, peak RSS growth {:.1f} MB\n",
               torch["torch"].get<std::string>(), seq, 1e3 * torch["fwd_s"].get<double>(), 1e3 * torch["fwdbwd_s"].get<double>(),
               torch["peak_rss_growth_bytes"].get<double>() / 1e6);
    benches.push_back(std::make_unique<Bench>(seq));
    Bench* b = benches.back().get();
    const std::string s = " S=" + std::to_string(seq);
    for (bool with_backward : {false, true}) {
      const std::string what = with_backward ? "fwd+bwd" : "fwd";
      const double torch_s = torch[with_backward ? "fwdbwd_s" : "fwd_s"].get<double>();
      const double torch_mb = torch["peak_rss_growth_bytes"].get<double>() / 1e6;
      benchmark::RegisterBenchmark(("causalqwen " + what + s).c_str(), [b, with_backward](benchmark::State& st) {
        const auto usage_start = causalqwen::ProcessUsage::now();
        for (auto _ : st) {
          b->forward();
          if (with_backward) b->backward();
        }
        cqbench::report_usage(st, usage_start);
        st.counters["memory_MB"] = b->memory_bytes() / 1e6;
      })->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
      benchmark::RegisterBenchmark(("pytorch " + what + s).c_str(), [torch_s, torch_mb](benchmark::State& st) {
        for (auto _ : st) st.SetIterationTime(torch_s);  // measured by the child process above
        st.counters["memory_MB"] = torch_mb;
      })->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
      reporter.add_pair("causalqwen " + what + s + "/min_time:1.000/real_time", "pytorch " + what + s + "/iterations:1/manual_time");
    }
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  fmt::print("peak RSS of this process (both blocks' parameters and arenas, S=128 and 512): {:.1f} MB\n",
             double(usage.ru_maxrss) / 1024.0);
  benchmark::Shutdown();
}
