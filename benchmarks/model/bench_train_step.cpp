// One full training step of the whole CausalQwen model — forward, backward, global-norm clip to
// 1.0, AdamW update — float32, against the same step in PyTorch
// (benchmarks/peers/train_step_torch.py, torch.set_num_threads(2), the repository's reference model; its loss materialises [B,S,K]),
// which this program runs itself, in the same command, before its own runs:
//   (a) small:    V 8192, H 256, 4 layers, 4 heads, 2 KV heads, FFN 704, K = V, B 4, S 128
//   (b) qwen0.5b: V 151936, H 896, 24 layers, 14 heads, 2 KV heads, FFN 4864, K 151666, B 1, S 128
// Random weights (init_random), the same batch formula on both sides, AdamW lr 1e-4, wd 0.01.
// Ours runs in two forms:
//   arena       the model's gradient arena, global_grad_norm, AdamW (clipping applied inside
//               the update) — the same state as PyTorch: θ, g, m, v in float32
//   streaming   optim::StreamingAdamW with bfloat16 moments (stochastic rounding): no gradient
//               arena (weight gradients kept as dY, X factors and formed tile by tile inside the
//               update), m and v in 16 bits — what a memory-bound user runs
//   streaming-kept  the same with 448 MiB for the tiles the norm forms (set_tile_cache_bytes):
//               W_cls's gradient (543.6 MB at the 0.5B shape, 8.4 MB at the small one) is
//               formed once for both the norm and the update where it fits, not twice
//   arena-bf16  the arena step in mixed precision (CausalQwen::set_precision(bf16, none)): the
//               decoder layers' and W_cls's products on bf16 operands with float sums
//               (linalg/bf16_gemm.hpp), each product rounding W itself, the rest as `arena`;
//               also printed as a ratio against `arena`
//   arena-bf16-m16-percall  arena-bf16 with AdamW's moments stored as bfloat16 (stochastic
//               rounding): 2 bytes per parameter less
//   arena-bf16-m16  the same with the layers' bf16 weight copies that AdamW rewrites as it
//               updates the rows (set_precision(bf16)'s default; `train --precision bf16
//               --moments bf16`): the fastest mixed-precision form; printed as a ratio against
//               `arena` and against arena-bf16-m16-percall (what the copies give)
//
// Throughput: tokens (B·S) per second of a step, median of PyTorch's timed steps and Google
// Benchmark's mean of ours, after one warm-up step each. Peak memory: each process's own VmHWM
// (/proc/self/status, peak resident set): PyTorch's over its whole process (interpreter, torch,
// parameters, gradients, AdamW moments, activations); ours reset (/proc/self/clear_refs = 5)
// before the configuration's model is built and read after its last step, so it covers the
// program, parameters, gradients, moments and every scratch buffer of that configuration.
//
//   OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE build-bench/bin/bench_train_step [small|qwen0.5b]
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"
#include "common/usage_counters.hpp"

#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/parameter_rules.hpp>
#include <causalqwen/optim/adamw.hpp>
#include <causalqwen/optim/clip.hpp>
#include <causalqwen/optim/streaming_adamw.hpp>

#include <nlohmann/json.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;

namespace {
constexpr int kThreads = 2;

/// A benchmarked configuration: the model's shapes, the batch and the timed steps per side.
struct StepShape {
  std::string name;
  cq::nn::TransformerConfig backbone;
  std::size_t classes, batch, seq, steps;
};

/// (a) and (b) of the file comment.
std::vector<StepShape> shapes() {
  return {{"small", {8192, 256, 704, 4, 4, 2, 1e-6, 1e6}, 8192, 4, 128, 10},
          {"qwen0.5b", {151936, 896, 4864, 24, 14, 2, 1e-6, 1e6}, 151666, 1, 128, 3}};
}

/// A field of /proc/self/status in bytes (VmHWM, VmRSS).
double status_bytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
  return 0;
}

/// Resets this process's VmHWM to its current resident set.
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

/// The model and one batch, as train_step_torch.py builds them.
struct StepData {
  cqm::CausalQwen<float> model;
  cqm::CausalQwen<float>::Cache cache;
  std::vector<std::int64_t> ids, labels;
  std::vector<float> values, targets;
  std::size_t B, S;

  /// The config (the library's defaults: threshold 10, α 0, λ 1) with <NUM> = K − 1.
  static cqm::CausalConfig config(const StepShape& s) {
    cqm::CausalConfig c;
    c.backbone = s.backbone;
    c.causal_size = s.backbone.hidden_size;
    c.num_classes = s.classes;
    c.num_token_id = static_cast<std::int64_t>(s.classes) - 1;
    return c;
  }

  explicit StepData(const StepShape& s) : model(config(s)), B(s.batch), S(s.seq) {
    model.init_random(1);
    const auto K = static_cast<std::int64_t>(s.classes), nid = K - 1;
    ids.resize(B * S), values.assign(B * S, 0.0f), labels.assign(B * S, -100), targets.assign(B * S, 0.0f);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < S; ++t) {
        const std::size_t i = b * S + t;
        if (t % 8 == 3) ids[i] = nid, values[i] = static_cast<float>(t) + 0.5f;
        else ids[i] = static_cast<std::int64_t>((i * 7919 + 13) % static_cast<std::size_t>(K - 1));
      }
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t + 1 < S; ++t) labels[b * S + t] = ids[b * S + t + 1], targets[b * S + t] = values[b * S + t + 1];
  }
  cqm::Batch<float> batch() const {
    return {{ids.data(), {B, S}}, {values.data(), {B, S}}, {}, {labels.data(), {B, S}}, {targets.data(), {B, S}}, {}};
  }
};

/// Forward, backward, clip to 1, AdamW with a whole gradient arena (the PyTorch state).
struct ArenaStep : StepData {
  cq::Arena<float> grads;
  cq::optim::AdamW<float> adam;
  cq::linalg::UpdateFollower<float>* follower = nullptr;  // the model's bf16 copies, when it keeps them
  explicit ArenaStep(const StepShape& s, cq::optim::MomentStorage moments = cq::optim::MomentStorage::full)
      : StepData(s),
        grads(model.make_gradients()),
        adam(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()), moments) {}
  double step() {
    grads.zero();
    const auto m = model.train_step(batch(), cache, grads);
    const double norm = cq::optim::global_grad_norm(grads, adam.rules());
    adam.step(model.params(), grads, 1e-4, cq::optim::clip_factor(norm, 1.0), follower);
    return m.L_total;
  }
};

/// The arena step with the decoder layers' and W_cls's products in bf16, AdamW's moments stored
/// as `Moments`, the layers' bf16 copies kept or not (the arena-bf16 forms of the file comment).
template <cq::optim::MomentStorage Moments, cq::linalg::WeightCopies Copies>
struct ArenaBf16Step : ArenaStep {
  explicit ArenaBf16Step(const StepShape& s) : ArenaStep(s, Moments) {
    model.set_precision(cq::linalg::Format::bf16, Copies);
    follower = model.update_follower();
  }
};

/// The same step through StreamingAdamW with bfloat16 moments and KeptMiB MiB for the norm's
/// tiles (file comment).
template <std::size_t KeptMiB>
struct StreamingStep : StepData {
  cq::optim::StreamingAdamW<float> adam;
  explicit StreamingStep(const StepShape& s)
      : StepData(s), adam(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()), cq::optim::MomentStorage::bf16) {
    adam.set_tile_cache_bytes(KeptMiB << 20);
  }
  /// Seconds spent in forward and backward, in the norm (the factors' Gram products, W_cls's
  /// tiles) and in the update (every weight gradient formed tile by tile unless kept, AdamW),
  /// summed over the steps since the last reset: printed per step as fwd_bwd_ms, norm_ms and
  /// update_ms.
  double fwd_bwd_seconds = 0, norm_seconds = 0, update_seconds = 0;
  double step() {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const cqm::HeadMetrics m = model.train_step(batch(), cache, adam.target());
    const auto t1 = Clock::now();
    const double norm = adam.grad_norm(model.params());
    const auto t2 = Clock::now();
    adam.step(model.params(), 1e-4, cq::optim::clip_factor(norm, 1.0));
    fwd_bwd_seconds += std::chrono::duration<double>(t1 - t0).count();
    norm_seconds += std::chrono::duration<double>(t2 - t1).count();
    update_seconds += std::chrono::duration<double>(Clock::now() - t2).count();
    return m.L_total;
  }
};

/// Runs train_step_torch.py for one configuration and returns its JSON line.
nlohmann::json run_torch(const StepShape& s) {
  const std::string cmd = std::string("/usr/bin/python3 ") + CQ_TORCH_TRAIN_STEP_SCRIPT + " " + s.name + " " +
                          std::to_string(kThreads) + " " + std::to_string(s.steps);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  while (pipe && fgets(buf, sizeof buf, pipe.get())) out += buf;
  const auto brace = out.find('{');
  if (brace == std::string::npos) throw std::runtime_error("train_step_torch.py printed no result: " + out);
  return nlohmann::json::parse(out.substr(brace));
}
}  // namespace

/// Runs PyTorch for each configuration, then ours; prints the speed and memory ratios.
int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  benchmark::Initialize(&argc, argv);
  const std::string only = argc > 1 ? argv[1] : "";
  omp_set_num_threads(kThreads);
  Eigen::setNbThreads(kThreads);
  cqbench::RatioReporter reporter;
  std::map<std::string, double> ours_peak, torch_peak;
  std::map<std::string, std::string> torch_of;  // our "form config" → its PyTorch config
  for (const auto& s : shapes()) {
    if (!only.empty() && only != s.name) continue;
    const auto torch = run_torch(s);
    const double tokens = static_cast<double>(s.batch * s.seq), torch_s = torch["step_s"].get<double>();
    torch_peak[s.name] = torch["vm_hwm_bytes"].get<double>();
    fmt::print("PyTorch {} ({} threads) {}: step {:.3f} s = {:.0f} tokens/s, VmHWM {:.0f} MB (RSS after import {:.0f} MB)\n",
               torch["torch"].get<std::string>(), kThreads, s.name, torch_s, tokens / torch_s, torch_peak[s.name] / 1e6,
               torch["rss_after_import_bytes"].get<double>() / 1e6);
    const std::string label = "train step " + s.name;
    auto register_ours = [&]<class Step>(const std::string& form) {
      const std::string key = form + " " + s.name;
      benchmark::RegisterBenchmark(("causalqwen " + form + " " + label).c_str(), [s, tokens, key, &ours_peak](benchmark::State& st) {
        reset_peak_rss();
        auto ts = std::make_unique<Step>(s);
        ts->step();  // warm-up: caches touched, moments allocated
        if constexpr (requires { ts->norm_seconds; }) ts->fwd_bwd_seconds = ts->norm_seconds = ts->update_seconds = 0;
        const auto usage_start = cq::ProcessUsage::now();
        for (auto _ : st) benchmark::DoNotOptimize(ts->step());
        cqbench::report_usage(st, usage_start);
        if constexpr (requires { ts->norm_seconds; }) {
          st.counters["fwd_bwd_ms"] = 1e3 * ts->fwd_bwd_seconds / double(st.iterations());
          st.counters["norm_ms"] = 1e3 * ts->norm_seconds / double(st.iterations());
          st.counters["update_ms"] = 1e3 * ts->update_seconds / double(st.iterations());
        }
        ours_peak[key] = status_bytes("VmHWM");
        st.counters["tokens_per_s"] = benchmark::Counter(tokens * double(st.iterations()), benchmark::Counter::kIsRate);
        st.counters["VmHWM_MB"] = ours_peak[key] / 1e6;
      })->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(static_cast<benchmark::IterationCount>(s.steps));
      reporter.add_pair("causalqwen " + form + " " + label + "/iterations:" + std::to_string(s.steps) + "/real_time",
                        "pytorch " + label + "/iterations:1/manual_time");
      torch_of[key] = s.name;
    };
    // arena-bf16 right after arena: a form run after streaming starts its peak from the memory
    // streaming's freed buffers still hold (measured 441 MB more for arena-bf16 there)
    register_ours.template operator()<ArenaStep>("arena");
    using Copies = cq::linalg::WeightCopies;
    register_ours.template operator()<ArenaBf16Step<cq::optim::MomentStorage::full, Copies::none>>("arena-bf16");
    register_ours.template operator()<ArenaBf16Step<cq::optim::MomentStorage::bf16, Copies::none>>("arena-bf16-m16-percall");
    register_ours.template operator()<ArenaBf16Step<cq::optim::MomentStorage::bf16, Copies::kept>>("arena-bf16-m16");
    register_ours.template operator()<StreamingStep<0>>("streaming");
    register_ours.template operator()<StreamingStep<448>>("streaming-kept");
    const std::string iterations = "/iterations:" + std::to_string(s.steps) + "/real_time";
    const auto ours = [&](const char* form) { return fmt::format("causalqwen {} {}{}", form, label, iterations); };
    for (const char* form : {"arena-bf16", "arena-bf16-m16-percall", "arena-bf16-m16"}) reporter.add_pair(ours(form), ours("arena"));
    reporter.add_pair(ours("arena-bf16-m16"), ours("arena-bf16-m16-percall"));
    reporter.add_pair(ours("streaming-kept"), ours("streaming"));
    const double tp = torch_peak[s.name];
    benchmark::RegisterBenchmark(("pytorch " + label).c_str(), [torch_s, tokens, tp](benchmark::State& st) {
      for (auto _ : st) st.SetIterationTime(torch_s);  // measured by the child process above
      st.counters["tokens_per_s"] = tokens / torch_s;
      st.counters["VmHWM_MB"] = tp / 1e6;
    })->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  fmt::print("\npeak memory (VmHWM of each side's own process; < 1 means less):\n");
  for (const auto& [key, ours] : ours_peak)
    fmt::print("  causalqwen {:<22} {:8.0f} MB   pytorch {:8.0f} MB   ratio {:.3f}x\n", key, ours / 1e6,
               torch_peak[torch_of[key]] / 1e6, ours / torch_peak[torch_of[key]]);
  benchmark::Shutdown();
}
