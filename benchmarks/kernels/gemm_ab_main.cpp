// The driver of benchmarks/kernels/gemm_ab.sh: times the products of two versions of the
// library's headers (gemm_before, gemm_after: benchmarks/kernels/gemm_ab_products.cpp compiled
// twice) on the same operands, a few calls of one followed by as many of the other (the first of each untimed), and
// prints per shape the medians of both and the median of the per-pair ratios before/after (> 1:
// the later version is faster). On a shared machine whose speed moves between minutes, the ratio
// of neighbouring calls is steadier than two runs' figures.
//
//   gemm_ab [demo|qwen0.5b] [f32|bf16]
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

extern "C" void gemm_before(float*, const float*, const float*, std::size_t, std::size_t, std::size_t, int, int);
extern "C" void gemm_after(float*, const float*, const float*, std::size_t, std::size_t, std::size_t, int, int);

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Shape {
  const char* name;
  std::size_t tokens, out, in;  // Y[tokens, out] = X[tokens, in]·W[out, in]ᵀ
};
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const std::string group = argc > 1 ? argv[1] : "demo", precision = argc > 2 ? argv[2] : "f32";
  if ((group != "demo" && group != "qwen0.5b") || (precision != "f32" && precision != "bf16")) {
    std::fprintf(stderr, "usage: gemm_ab [demo|qwen0.5b] [f32|bf16]\n");
    return 2;
  }
  std::vector<Shape> shapes;
  if (group == "demo")  // the demo model's linear maps, one batch of 16×64 tokens
    shapes = {{"cls", 1024, 1024, 64}, {"qkv", 1024, 128, 64}, {"gate_up", 1024, 256, 64}, {"down", 1024, 64, 128}};
  else  // Qwen2.5-0.5B's, prompts of 128 and 512 tokens
    for (std::size_t T : {128, 512})
      for (const Shape& s : {Shape{"qkv", T, 1152, 896}, Shape{"o", T, 896, 896}, Shape{"gate_up", T, 9728, 896}, Shape{"down", T, 896, 4864}})
        shapes.push_back(s);
  const int bf16 = precision == "bf16";
  const char* product[] = {"fwd Y=XWt", "bwd dX+=dYW", "bwd dW+=dYtX"};
  std::printf("%-8s %-13s %5s %5s %5s %11s %11s %14s\n", "shape", "product", "M", "N", "K", "before ms", "after ms", "before/after");
  for (int which = 0; which < 3; ++which)
    for (const Shape& s : shapes) {
      const std::size_t M = s.tokens, N = s.out, K = s.in;
      // the operands of each product: forward X, W → Y; dX: dY, W → dX; dW: dY, X → dW
      const std::size_t in_size = which == 0 ? M * K : M * N, w_size = which == 2 ? M * K : N * K,
                        out_size = which == 0 ? M * N : which == 1 ? M * K : N * K;
      std::vector<float> in(in_size), w(w_size), out(out_size);
      std::mt19937 rng(1);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (auto& v : in) v = normal(rng);
      for (auto& v : w) v = normal(rng);
      const double flop = 2.0 * double(M) * double(N) * double(K);
      // Each side runs `runs` calls in a row, the first untimed (it finds its buffers cold and the
      // operands where the other version's threads left them); the rest are timed together.
      constexpr int runs = 4;
      const int pairs = std::max(7, int(1e9 / flop));
      const auto timed = [&](auto gemm) {
        gemm(out.data(), in.data(), w.data(), M, N, K, which, bf16);
        const double t = now();
        for (int r = 1; r < runs; ++r) gemm(out.data(), in.data(), w.data(), M, N, K, which, bf16);
        return (now() - t) / (runs - 1);
      };
      std::vector<double> before, after, ratio;
      for (int i = 0; i < pairs; ++i) {
        const double b = timed(gemm_before), a = timed(gemm_after);
        before.push_back(b);
        after.push_back(a);
        ratio.push_back(b / a);
      }
      std::printf("%-8s %-13s %5zu %5zu %5zu %11.3f %11.3f %13.3fx\n", s.name, product[which], M, N, K, 1e3 * median(before),
                  1e3 * median(after), median(ratio));
    }
  return 0;
}
