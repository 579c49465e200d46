// The decoding kernels against the memory, minute by minute. One decoding step multiplies one
// row by every layer's weight matrices, each read once from memory; this program holds the 24
// layers' matrices of the Qwen2.5-0.5B shape (q|k|v 1152×896, o 896×896, gate|up 9728×896, down
// 896×4864) as packed bf16 and int8 copies and as float, and in each of R rounds times, one
// after another:
//   probe        a SIMD sum over a 1 GiB float array on 2 MiB pages (all threads): what the
//                memory delivers this round
//   f32          the few-rows float kernel over the float matrices (an arena on 2 MiB pages)
//   bf16 pages   the bf16 product over the packed copies, on 2 MiB pages (PageBuffer)
//   bf16 heap    the same kernel over copies of the same panels in std::vector (4 KiB pages)
//   int8 pages   the int8 integer-dot kernel over the int8 copies, on 2 MiB pages
//   int8 heap    the same over std::vector copies
//   head f32     the Cauchy head's single pass over the class weights W_cls [151936, 896] (the
//                vocabulary of Qwen2.5), loc_S = loc_A·Wᵀ + b and scale_S = scale_A·|W|ᵀ at once,
//                from the float matrix (linalg/cauchy_linear.hpp)
//   head bf16    the same from a packed bf16 copy
//   head int8    the same from an int8 copy
// and prints each one's GB/s and its fraction of the same round's probe. The memory of a shared
// virtual machine can change speed between minutes by 1.5×; the rounds put every kernel beside
// a probe of the same moment, so kernels and layouts compare within a round.
//
//   build/bin/bench_decode_stream [THREADS=2] [ROUNDS=8]
//   build/bin/bench_decode_stream --probe [THREADS=2]   the probe alone (best of 3 reads), in GB/s:
//                                                       benchmarks/peers/llama_cpp_peer.sh brackets a
//                                                       peer's runs with it
#include "common/thread_settings.hpp"
#include <causalqwen/core/arena.hpp>
#include <causalqwen/core/page_buffer.hpp>
#include <causalqwen/core/process_usage.hpp>
#include <causalqwen/core/threading.hpp>
#include <causalqwen/linalg/bf16_gemm.hpp>
#include <causalqwen/linalg/cauchy_linear.hpp>
#include <causalqwen/linalg/gemv.hpp>
#include <causalqwen/linalg/int8_dot.hpp>

#include "common/peak.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;

namespace {

struct Shape {
  std::size_t n, k;
};

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  if (argc > 1 && std::string(argv[1]) == "--probe") {
    const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
    if (threads < 1 || argc > 3) {
      fmt::print(stderr, "usage: bench_decode_stream --probe [THREADS >= 1]\n");
      return 2;
    }
    cq::set_threads(static_cast<std::size_t>(threads));
    cq::PageBuffer<float> probe(std::size_t(1) << 28);  // 1 GiB
    for (std::size_t i = 0; i < probe.size(); ++i) probe[i] = float(i % 7);
    double best = 0;
    for (int pass = 0; pass < 4; ++pass)  // the first touches the threads and the TLB
      if (const double gbs = double(probe.size() * sizeof(float)) / cqbench::read_pass_seconds(probe.data(), probe.size()); pass > 0)
        best = std::max(best, gbs);
    fmt::print("{:.2f}\n", best / 1e9);
    return 0;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 8;
  if (threads < 1 || rounds < 1 || argc > 3) {
    fmt::print(stderr, "usage: bench_decode_stream [THREADS >= 1] [ROUNDS >= 1]  |  bench_decode_stream --probe [THREADS >= 1]\n");
    return 2;
  }
  cq::set_threads(static_cast<std::size_t>(threads));
  const std::vector<Shape> shapes = {{1152, 896}, {896, 896}, {9728, 896}, {896, 4864}};
  constexpr std::size_t layers = 24;

  // the float matrices in one arena (2 MiB pages), the packed copies, and heap copies of their panels
  auto layout = std::make_shared<cq::Layout>();
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t i = 0; i < shapes.size(); ++i) layout->add(fmt::format("w{}.{}", l, i), {shapes[i].n, shapes[i].k});
  cq::Arena<float> weights(layout);
  std::mt19937_64 rng(20261125);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float& v : weights.span()) v = normal(rng);
  std::vector<la::PackedMatrix> bf16, int8;
  std::vector<std::vector<std::uint16_t>> bf16_heap_store;
  std::vector<std::vector<std::int8_t>> int8_heap_store;
  std::vector<la::PackedRef> bf16_pages, bf16_heap, int8_pages, int8_heap;
  std::vector<cq::TensorView<const float, 2>> floats;
  double bytes_f32 = 0;
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto w = weights.view<2>(fmt::format("w{}.{}", l, i));
      floats.emplace_back(w);
      bytes_f32 += 4.0 * double(w.size());
      bf16.emplace_back(la::Format::bf16, cq::TensorView<const float, 2>(w));
      int8.emplace_back(la::Format::int8, cq::TensorView<const float, 2>(w));
    }
  for (std::size_t m = 0; m < bf16.size(); ++m) {
    la::PackedRef b = bf16[m].ref(), q = int8[m].ref();
    const std::size_t stored = (b.rows + la::panel_rows - 1) / la::panel_rows * la::panel_rows * b.cols_padded;
    bf16_heap_store.emplace_back(b.bf16, b.bf16 + stored);
    int8_heap_store.emplace_back(q.q, q.q + stored);
    bf16_pages.push_back(b);
    int8_pages.push_back(q);
    b.bf16 = bf16_heap_store.back().data();
    q.q = int8_heap_store.back().data();
    bf16_heap.push_back(b);
    int8_heap.push_back(q);
  }
  // the head: W_cls [V,C] as float (only to pack it), bias, and its bf16 and int8 copies
  constexpr std::size_t vocab = 151936, hidden = 896;
  cq::PageBuffer<float> w_cls(vocab * hidden);
  for (std::size_t i = 0; i < w_cls.size(); ++i) w_cls[i] = normal(rng);
  const cq::TensorView<const float, 2> w_cls_view(w_cls.data(), {vocab, hidden});
  const la::PackedMatrix head_f32, head_bf16(la::Format::bf16, w_cls_view), head_int8(la::Format::int8, w_cls_view);
  std::vector<float> bias_S(vocab, 0.01f), loc_A(hidden), scale_A(hidden), loc_S(vocab), scale_S(vocab);
  for (std::size_t j = 0; j < hidden; ++j) loc_A[j] = normal(rng) * 50.0f, scale_A[j] = 1.0f + std::abs(normal(rng)) * 50.0f;
  const auto head_pass = [&](const la::PackedMatrix& packed) {
    const double t = cqbench::seconds_now();
    const auto A = cq::assume_cauchy_view<cq::Kind::independent>(cq::TensorView<const float, 2>(loc_A.data(), {1, hidden}),
                                                                 cq::TensorView<const float, 2>(scale_A.data(), {1, hidden}));
    la::cauchy_linear<float, cq::Kind::independent>(
        {cq::TensorView<float, 2>(loc_S.data(), {1, vocab}), cq::TensorView<float, 2>(scale_S.data(), {1, vocab})},
        la::Weight<const float>(w_cls_view).with_decode(packed.ref()), cq::TensorView<const float, 1>(bias_S.data(), {vocab}), A);
    return cqbench::seconds_now() - t;
  };
  const double head_bytes_f32 = 4.0 * vocab * hidden, head_bytes_bf16 = 2.0 * vocab * hidden, head_bytes_int8 = (1.0 + 4.0 / hidden) * vocab * hidden;

  cq::PageBuffer<float> probe(std::size_t(1) << 28);  // 1 GiB
  for (std::size_t i = 0; i < probe.size(); ++i) probe[i] = float(i % 7);

  std::vector<float> x(4864, 0.5f), y(9728);
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = normal(rng) * 50.0f;
  const auto pass = [&](const std::vector<la::PackedRef>* packed) {
    const double t = cqbench::seconds_now();
    for (std::size_t m = 0; m < floats.size(); ++m) {
      const std::size_t n = floats[m].shape[0], k = floats[m].shape[1];
      const cq::TensorView<float, 2> out(y.data(), {1, n});
      const cq::TensorView<const float, 2> in(x.data(), {1, k});
      if (!packed) la::few_rows_linear_forward<float>(out, in, floats[m]);
      else if ((*packed)[m].type == la::Format::bf16) la::bf16_linear_forward(out, in, (*packed)[m]);
      else la::int8_linear_forward(out, in, (*packed)[m]);
    }
    return cqbench::seconds_now() - t;
  };
  const double bytes_bf16 = bytes_f32 / 2, bytes_int8 = bytes_f32 / 4;
  fmt::print("{} threads; bf16 product on {}, int8 product on {}; {} layers: {:.3f} GB float, {:.3f} GB bf16, {:.3f} GB int8;\nthe head: W_cls [{}, {}], {:.3f} GB float, {:.3f} GB bf16, {:.3f} GB int8\n",
             threads, la::bf16_kernel_name(), la::int8_kernel_name(), layers, bytes_f32 / 1e9, bytes_bf16 / 1e9,
             bytes_int8 / 1e9, vocab, hidden, head_bytes_f32 / 1e9, head_bytes_bf16 / 1e9, head_bytes_int8 / 1e9);
  for (int warm = 0; warm < 2; ++warm) {  // first touches, thread start-up
    pass(nullptr), pass(&bf16_pages), pass(&bf16_heap), pass(&int8_pages), pass(&int8_heap);
    head_pass(head_f32), head_pass(head_bf16), head_pass(head_int8);
    cqbench::read_pass_seconds(probe.data(), probe.size());
  }
  const char* names[] = {"f32", "bf16 pages", "bf16 heap", "int8 pages", "int8 heap", "head f32", "head bf16", "head int8"};
  constexpr int columns = 8;
  const double bytes[] = {bytes_f32, bytes_bf16, bytes_bf16, bytes_int8, bytes_int8, head_bytes_f32, head_bytes_bf16, head_bytes_int8};
  std::map<std::string, std::vector<double>> fraction;
  fmt::print("\nround   probe GB/s |");
  for (const char* name : names) fmt::print(" {:>16}", name);
  fmt::print("   (GB/s, of the probe)\n");
  const auto usage_start = cq::ProcessUsage::now();
  for (int r = 0; r < rounds; ++r) {
    const double bw = double(probe.size() * sizeof(float)) / cqbench::read_pass_seconds(probe.data(), probe.size());
    const double seconds[] = {pass(nullptr),       pass(&bf16_pages),     pass(&bf16_heap), pass(&int8_pages),
                              pass(&int8_heap),  head_pass(head_f32),   head_pass(head_bf16), head_pass(head_int8)};
    fmt::print("{:>5} {:>12.1f} |", r + 1, bw / 1e9);
    for (int k = 0; k < columns; ++k) {
      const double gbs = bytes[k] / seconds[k];
      fraction[names[k]].push_back(gbs / bw);
      fmt::print(" {:>9.1f} ({:>4.2f})", gbs / 1e9, gbs / bw);
    }
    fmt::print("\n");
  }
  fmt::print("\nmedian fraction of the round's probe:");
  for (const char* name : names) {
    auto v = fraction[name];
    std::sort(v.begin(), v.end());
    fmt::print("  {} {:.2f}", name, v[v.size() / 2]);
  }
  const auto usage = cq::ProcessUsage::now() - usage_start;
  fmt::print("\nthe timed rounds: {} minor page faults, system time {:.1f} % of wall (not counted: the set-up,\n"
             "which fills the weights, their copies and the probe)\n",
             usage.minor_faults, 100.0 * usage.system_share());
}
