// Generation speed on a Qwen2.5-0.5B-shaped random CausalQwen (vocab 151936, H 896, 24 layers,
// 14/2 heads, FFN 4864, K = 151666 classes, C = H), float32, B = 1:
//   prefill tokens/s at S = 128 and 512 (or the lengths of --prefill; the prompt through the stack into the KV cache, then
//   the deterministic head on the last position), and decode tokens/s (one token per step after
//   a 128-token prompt: the stack with the KV cache + the head over all K classes) with the
//   weight matrices read as float32, then as bf16 and int8 copies (CausalQwen::use_weights; a
//   bf16 copy also runs prefill's products in bf16, and an int8 copy does on AVX512-BF16 with its
//   q widened to bf16: linalg/bf16_gemm.hpp),
// against, in the same run,
//   (a) a STREAM-like read bandwidth (SIMD sum of a 1 GiB float array on 2 MiB pages, as the
//       weights are, all threads), measured at the start and again just before and just after
//       each decode phase: decode is bound by reading the weights, so achieved GB/s = weight
//       bytes read per token (of the type read) × tokens/s is reported as a fraction of the mean
//       of the phase's two probes (the memory of a shared machine changes speed between minutes);
//   (b) the multiply-add peaks of this CPU (float FMA, and bf16 vdpbf16ps when it has it: many
//       independent chains in registers, all threads), which prefill's GFLOP/s is a fraction of;
//   (c) the same model in PyTorch (benchmarks/peers/generate_torch.py,
//       torch.set_num_threads(THREADS)), greedy with a KV cache and the tied lm_head over all 151,936 rows.
// Run with OMP_WAIT_POLICY=PASSIVE (and OPENBLAS_CORETYPE=SkylakeX for both sides).
// usage: bench_generate [THREADS=2] [DECODE_STEPS=24] [--no-torch] [--only f32|bf16|int8] [--decode-only]
//                       [--prefill-only] [--prefill S,S,...] [--context L]
//   --only TYPE     measure that weight type alone
//   --prefill S,…   the prompt lengths of the prefill phases, on both sides (default 128,512; up
//                   to 8192: e.g. 4096 for a long prompt, where attention weighs most)
//   --decode-only   skip the prefill phases and the peaks (decode after the 128-token prompt only):
//                   a short run, for alternating with a peer's decode in the same minutes
//   --prefill-only  skip the decode phases (with --no-torch): a short run, for alternating with a
//                   peer's prefill in the same minutes
//   CQ_TORCH_DTYPE=bf16 in the environment: the PyTorch peer in bfloat16 (generate_torch.py)
//   CQ_INT8_PREFILL=bf16 in the environment: int8 prefill on oneDNN (where it runs AMX) with Q
//                   widened to bf16 instead of X quantised to s8
//   --context L     decode after an L-token prompt instead of 128 (1 to 8192; ours only, with
//                   --no-torch): the steps then also read L keys and values per layer from the KV
//                   cache (float, or bf16 beside bf16 and int8 weights), whose bytes are printed
#include "common/thread_settings.hpp"
#include <causalqwen/core/page_buffer.hpp>
#include <causalqwen/linalg/kernels/onednn_bf16.hpp>
#include <causalqwen/core/process_usage.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/generate/generator.hpp>
#include <causalqwen/linalg/bf16_gemm.hpp>

#include "common/peak.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <memory>
#include <numeric>
#include <cstdlib>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The probe's 1 GiB array, on 2 MiB pages as the weights are (core/page_buffer.hpp).
cq::PageBuffer<float> probe_array() {
  const std::size_t n = (std::size_t(1) << 30) / sizeof(float);
  cq::PageBuffer<float> a(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) a[static_cast<std::size_t>(i)] = float(i % 7);
  return a;
}

/// Read bandwidth in bytes/s: the best of `passes` reads of the array (cqbench::read_pass_seconds).
double stream_read_bandwidth(const cq::PageBuffer<float>& a, int passes) {
  double best = 0;
  for (int rep = 0; rep < passes; ++rep)
    best = std::max(best, double(a.size() * sizeof(float)) / cqbench::read_pass_seconds(a.data(), a.size()));
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}


}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  // CQ_INT8_PREFILL=bf16: int8 prefill on oneDNN with Q widened to bf16 instead of X as s8
  // (linalg/kernels/onednn_bf16.hpp), for comparing the two in alternating runs
  if (const char* way = std::getenv("CQ_INT8_PREFILL"); way != nullptr && std::string(way) == "bf16")
    cq::linalg::onednn_int8_prefill() = cq::linalg::OnednnInt8::bf16;
  const auto usage = [] {
    std::fprintf(stderr, "usage: bench_generate [THREADS >= 1] [DECODE_STEPS >= 3: the first two are warm-up] [--no-torch] "
                         "[--only f32|bf16|int8] [--decode-only | --prefill-only] [--prefill S,S,... (1 to 8192)] [--context L (1 to 8192; "
                         "with --no-torch)]\n");
    return 2;
  };
  int threads = 2;
  std::size_t decode_steps = 24;
  bool torch = true, decode_only = false, prefill_only = false;
  std::vector<std::string> types = {"f32", "bf16", "int8"};
  std::vector<std::size_t> prefill_lengths = {128, 512};
  std::size_t context = 128;  // the prompt before the decode steps
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-torch") {
      torch = false;
    } else if (arg == "--decode-only") {
      decode_only = true;
    } else if (arg == "--prefill-only") {
      prefill_only = true;
    } else if (arg == "--prefill" && i + 1 < argc) {
      prefill_lengths.clear();
      std::string list = argv[++i];
      for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        char* end = nullptr;
        const unsigned long S = std::strtoul(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || S < 1 || S > 8192) {
          std::fprintf(stderr, "bench_generate: --prefill takes prompt lengths from 1 to 8192 separated by commas, got '%s'\n",
                       list.c_str());
          return usage();
        }
        prefill_lengths.push_back(S);
        start = comma + 1;
      }
    } else if (arg == "--context" && i + 1 < argc) {
      char* end = nullptr;
      context = std::strtoul(argv[++i], &end, 10);
      if (*end != '\0' || context < 1 || context > 8192) {
        std::fprintf(stderr, "bench_generate: --context takes a prompt length from 1 to 8192, got '%s'\n", argv[i]);
        return usage();
      }
    } else if (arg == "--only" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t != "f32" && t != "bf16" && t != "int8") {
        std::fprintf(stderr, "bench_generate: --only takes f32, bf16 or int8, got '%s'\n", t.c_str());
        return usage();
      }
      types = {t};
    } else if (positional == 0 && !arg.starts_with("-")) {
      threads = std::atoi(arg.c_str()), ++positional;
    } else if (positional == 1 && !arg.starts_with("-")) {
      decode_steps = std::strtoul(arg.c_str(), nullptr, 10), ++positional;
    } else {
      std::fprintf(stderr, "bench_generate: unexpected argument '%s'\n", arg.c_str());
      return usage();
    }
  }
  if (threads < 1 || decode_steps < 3) return usage();
  if (decode_only && prefill_only) {
    std::fprintf(stderr, "bench_generate: --decode-only and --prefill-only exclude each other\n");
    return usage();
  }
  if (prefill_only && (torch || context != 128)) {
    std::fprintf(stderr, "bench_generate: --prefill-only measures ours alone and decodes nothing: it needs --no-torch and no --context\n");
    return usage();
  }
  if (context != 128 && torch) {
    std::fprintf(stderr, "bench_generate: the PyTorch peer decodes after 128 tokens; --context %zu needs --no-torch\n", context);
    return usage();
  }
  omp_set_num_threads(threads);
  fmt::print("threads {}\n", threads);
  const auto probe = probe_array();
  const double bw = stream_read_bandwidth(probe, 5);
  fmt::print("STREAM-like read bandwidth: {:.2f} GB/s (each decode phase is bracketed by probes of its own)\n", bw / 1e9);
  const double f32_peak = decode_only ? 0.0 : cqbench::float_fma_peak(), bf16_peak = decode_only ? 0.0 : cqbench::bf16_dot_peak();
  if (!decode_only)
    fmt::print("multiply-add peak: float FMA {:.0f} GFLOP/s, bf16 vdpbf16ps {:.0f} GFLOP/s (0: not measured on this CPU); bf16 "
             "products run on: {}\n",
             f32_peak / 1e9, bf16_peak / 1e9, cq::linalg::bf16_kernel_name());

  cqm::CausalConfig cfg;
  cfg.backbone = cq::nn::TransformerConfig::qwen2_5_0_5b();
  cfg.causal_size = 896;
  cfg.num_classes = 151666;
  cfg.num_token_id = 151665;
  auto model = std::make_unique<cqm::CausalQwen<float>>(cfg);
  {
    const double t = now();
    model->init_random(1);
    fmt::print("model: {} parameters, initialised in {:.1f} s\n", model->params().size(), now() - t);
  }
  const auto& bc = cfg.backbone;
  const std::size_t H = bc.hidden_size, F = bc.intermediate_size, C = cfg.causal_size, K = cfg.num_classes;
  const std::size_t layer_params = bc.qkv_size() * H + bc.qkv_size() + H * H + 3 * H * F + 2 * H;
  const std::size_t per_token_params = bc.num_layers * layer_params + H + 2 * C * H + 2 * C + K * C + K + K + 2 * C;
  const double bytes_per_token = double(per_token_params) * sizeof(float);
  fmt::print("weights read per decoded token: {:.3f} GB (layers, final norm, abduction, W_cls once, b_cls, thresholds)\n",
             bytes_per_token / 1e9);

  cqg::NextTokenHead<float> head(cfg);
  std::vector<cqg::StepDecision> decision(1);
  cqg::DecodeSettings det;
  auto head_step = [&](const float* z) {
    head.step(model->head_params(), {z, {1, H}}, det, {}, decision);
  };
  typename cq::model::CausalQwen<float>::InferenceState state;
  std::vector<std::int64_t> ids(std::max(context, *std::max_element(prefill_lengths.begin(), prefill_lengths.end())));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7919) % 151000);

  // multiply-adds of a prefill of S tokens, per token: the linear layers, and causal attention
  // (QKᵀ and PV over S(S+1)/2 query-key pairs per head); the head on the last position is left out
  const auto prefill_flops_per_token = [&](std::size_t S) {
    const double linear = 2.0 * double(bc.num_layers) * double(bc.qkv_size() * H + H * H + 3 * H * F);
    const double attention = 2.0 * 2.0 * double(bc.num_layers) * double(bc.num_heads * bc.head_dim()) * double(S + 1) / 2.0;
    return linear + attention;
  };
  nlohmann::json ours;
  const auto measure_prefill = [&](const std::string& type_name) {
    for (std::size_t S : prefill_lengths) {
      std::vector<double> times;
      const auto prefill = [&] {
        const double t = now();
        model->begin_inference(state, 1, S + 1);
        const auto z = model->forward_cached({ids.data(), {1, S}}, {}, {}, {}, state);
        head_step(z.data + (S - 1) * H);
        return now() - t;
      };
      const auto first_start = cq::ProcessUsage::now();
      prefill();  // warm-up: lays out the buffers of this length
      const auto first = cq::ProcessUsage::now() - first_start;
      const auto usage_start = cq::ProcessUsage::now();
      for (int rep = 0; rep < 3; ++rep) times.push_back(prefill());
      const auto usage = cq::ProcessUsage::now() - usage_start;
      ours["prefill"][type_name][std::to_string(S)] = median(times);
      fmt::print("prefill {} S = {}: {:.0f} minor page faults per timed prefill (the first, untimed: {}), system time {:.1f} % of "
                 "wall\n",
                 type_name, S, double(usage.minor_faults) / 3.0, first.minor_faults, 100.0 * usage.system_share());
    }
  };
  // decode with the weight matrices read as f32, then as bf16 and int8 copies
  const std::size_t packed_params = bc.num_layers * (bc.qkv_size() * H + H * H + 3 * H * F) + K * C;
  for (const auto& type_name : types) {
    const auto type = cq::linalg::parse_weight_type(type_name);
    model->use_weights(type);
    if (!decode_only) measure_prefill(type_name);
    if (prefill_only) continue;
    const double bytes = type == cq::linalg::Format::f32
                             ? bytes_per_token
                             : double(model->packed_bytes()) + double(per_token_params - packed_params) * sizeof(float);
    model->begin_inference(state, 1, context + decode_steps + 1);
    const auto z = model->forward_cached({ids.data(), {1, context}}, {}, {}, {}, state);
    head_step(z.data + (context - 1) * H);
    std::vector<double> times;
    // the memory's speed changes from minute to minute on shared machines: probe it just before
    // and just after the decode steps, and report decode's GB/s against the mean of the two
    const double probe_before = stream_read_bandwidth(probe, 3);
    auto usage_start = cq::ProcessUsage::now();
    for (std::size_t s = 0; s < decode_steps; ++s) {
      if (s == 2) usage_start = cq::ProcessUsage::now();  // the steps after the two warm-up ones, as the times
      const double t = now();
      std::int64_t tok = decision[0].token;
      const auto z1 = model->forward_cached({&tok, {1, 1}}, {}, {}, {}, state);
      head_step(z1.data);
      times.push_back(now() - t);
    }
    const auto usage = cq::ProcessUsage::now() - usage_start;
    ours["probe"][type_name] = (probe_before + stream_read_bandwidth(probe, 3)) / 2;
    times.erase(times.begin(), times.begin() + 2);
    ours["decode"][type_name] = median(times);
    ours["bytes"][type_name] = bytes;
    fmt::print("decode {}: {:.3f} GB read per token, {:.1f} minor page faults per token after the two warm-up steps, system "
               "time {:.1f} % of wall\n",
               type_name, bytes / 1e9, double(usage.minor_faults) / double(decode_steps - 2), 100.0 * usage.system_share());
    const auto& kv = state.backbone.kv;
    fmt::print("decode {}: the KV cache holds {} keys and values, {:.1f} MB of them read per token after {} tokens (not in "
               "the GB above)\n",
               type_name, kv.storage == cq::nn::KvStorage::bf16 ? "bf16" : "float",
               double(2 * bc.num_layers * bc.num_kv_heads * bc.head_dim() * (context + decode_steps / 2)) *
                   (kv.storage == cq::nn::KvStorage::bf16 ? 2.0 : 4.0) / 1e6,
               context);
    // the head alone (the fused vocabulary pass dominates it)
    std::vector<double> ht;
    for (int r = 0; r < 8; ++r) {
      const double t = now();
      head_step(z.data + (context - 1) * H);
      ht.push_back(now() - t);
    }
    ours["head"][type_name] = median(ht);
  }
  nlohmann::json peer;
  if (torch) {
    std::string cmd = fmt::format("/usr/bin/python3 {} {} {}", CQ_TORCH_GENERATE_SCRIPT, threads, decode_steps);
    for (std::size_t S : prefill_lengths) cmd += fmt::format(" {}", S);
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    char buf[4096];
    while (pipe && std::fgets(buf, sizeof buf, pipe.get())) out += buf;
    try {
      peer = nlohmann::json::parse(out.substr(out.find('{')));
    } catch (...) {
      fmt::print("PyTorch peer failed: {}\n", out);
    }
  }
  fmt::print("\n{:<26} {:>12} {:>14} {:>12}\n", "", "ours tok/s", "PyTorch tok/s", "ours/PyTorch");
  // the peer's columns: its tokens/s and our ratio, or a dash where it did not run (--no-torch) or failed
  const auto peer_cells = [&](double ours_tps, double peer_tps, int decimals) {
    if (peer.is_null()) return fmt::format("{:>14} {:>12}", "-", "-");
    return fmt::format("{:>14.{}f} {:>11.2f}x", peer_tps, decimals, ours_tps / peer_tps);
  };
  for (const auto& type_name : decode_only ? std::vector<std::string>{} : types)
    for (std::size_t S : prefill_lengths) {
      const double o = double(S) / ours["prefill"][type_name][std::to_string(S)].get<double>();
      const double p = peer.is_null() ? 0 : double(S) / peer["prefill"][std::to_string(S)].get<double>();
      fmt::print("{:<26} {:>12.1f} {}\n", fmt::format("prefill {} S = {}", type_name, S), o, peer_cells(o, p, 1));
    }
  if (!prefill_only) {
    const double dp = peer.is_null() ? 0 : 1.0 / peer["decode_s_per_token"].get<double>();
    for (const auto& type_name : types) {
      const double d = 1.0 / ours["decode"][type_name].get<double>();
      fmt::print("{:<26} {:>12.2f} {}\n", fmt::format("decode {} (after {})", type_name, context), d, peer_cells(d, dp, 2));
    }
    fmt::print("\n{:<6} {:>12} {:>10} {:>10} {:>12} {:>16} {:>14}\n", "decode", "GB/token", "tok/s", "GB/s", "probe GB/s",
               "of bandwidth", "head alone ms");
    for (const auto& type_name : types) {
      const double d = 1.0 / ours["decode"][type_name].get<double>(), bytes = ours["bytes"][type_name].get<double>();
      const double phase_bw = ours["probe"][type_name].get<double>();
      fmt::print("{:<6} {:>12.3f} {:>10.2f} {:>10.2f} {:>12.2f} {:>16.2f} {:>14.1f}\n", type_name, bytes / 1e9, d, bytes * d / 1e9,
                 phase_bw / 1e9, bytes * d / phase_bw, ours["head"][type_name].get<double>() * 1e3);
    }
    const char* torch_dtype = std::getenv("CQ_TORCH_DTYPE");
    fmt::print("(probe GB/s: the read bandwidth measured just before and after the phase's decode steps, their mean; "
               "the PyTorch peer runs in {})\n",
               torch_dtype != nullptr && std::string(torch_dtype) == "bf16" ? "bfloat16 (CQ_TORCH_DTYPE=bf16)" : "float32");
  }
  if (decode_only) return 0;
  fmt::print("\n{:<8} {:>4} {:>10} {:>10} {:>22}\n", "prefill", "S", "tok/s", "GFLOP/s", "of its multiply-add peak");
  for (const auto& type_name : types)
    for (std::size_t S : prefill_lengths) {
      const double tps = double(S) / ours["prefill"][type_name][std::to_string(S)].get<double>();
      const double gflops = tps * prefill_flops_per_token(S) / 1e9;
      const bool on_vdpbf16ps = type_name == "bf16"   ? cq::linalg::bf16_kernel_isa() == cq::linalg::Bf16Isa::avx512_bf16
                                : type_name == "int8" ? cq::linalg::int8_rows_on_bf16()
                                                      : false;
      const double peak = on_vdpbf16ps ? bf16_peak : f32_peak;
      fmt::print("{:<8} {:>4} {:>10.1f} {:>10.0f} {:>22.2f}\n", type_name, S, tps, gflops, peak > 0 ? gflops * 1e9 / peak : 0.0);
    }
  fmt::print("(GFLOP/s counts the linear layers and attention; f32 prefill runs float GEMMs (the float FMA peak), bf16 and int8 the\n"
             " bf16 product (int8: {}; the vdpbf16ps peak when it runs on AVX512-BF16))\n",
             cq::linalg::int8_rows_on_bf16() ? "its rows of q widened to bf16, exactly" : "the float GEMM on this CPU, the float FMA peak");
  return 0;
}
