// Uses the installed model headers the way a user's program would: compiled without any -march
// flag (the library picks its AVX-512 / AVX2 kernels at run time, so every kernel must compile for
// the baseline instruction set). One training step of a tiny CausalQwen in float, and a product
// of each kind decoding and mixed precision use (bf16 operands, packed bf16 and int8 weights),
// each against the float product.
#include <causalqwen/linalg/packed_weight.hpp>
#include <causalqwen/model.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace cqm = causalqwen::model;
namespace la = causalqwen::linalg;
using causalqwen::TensorView;

int main() {
  constexpr cqm::StaticConfig tiny{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_layers = 2, .num_heads = 4,
      .num_kv_heads = 2, .causal_size = 8, .num_classes = 15, .num_token_id = 14};
  cqm::CausalQwen<float, tiny> model;
  model.init_random(/*seed=*/1);
  const std::vector<std::int64_t> ids{3, 5, 14, 7}, labels{5, 14, 7, -100};
  const std::vector<float> numbers{0, 0, 42.0f, 0}, targets{0, 42.0f, 0, 0};
  const cqm::Batch<float> batch{{ids.data(), {1, 4}}, {numbers.data(), {1, 4}}, {}, {labels.data(), {1, 4}},
                                {targets.data(), {1, 4}}, {}};
  cqm::CausalQwen<float, tiny>::Cache cache;
  auto grads = model.make_gradients();
  const auto m = model.train_step(batch, cache, grads);

  // Y = X·Wᵀ, X [M,K], W [N,K], in float and in the narrower forms
  const std::size_t M = 3, K = 40, N = 20;
  std::vector<float> x(M * K), w(N * K), y_f32(M * N), y(M * N);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * float(i));
  const TensorView<const float, 2> X(x.data(), {M, K}), W(w.data(), {N, K});
  la::linear_forward<float>(TensorView<float, 2>(y_f32.data(), {M, N}), X, W);
  double worst = 0;  // the largest difference from the float product, over the three forms
  const auto compare = [&] {
    for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(double(y[i]) - y_f32[i]));
  };
  la::linear_forward<float>(TensorView<float, 2>(y.data(), {M, N}), X, la::Weight<const float>(W).with_precision(la::Format::bf16));
  compare();
  for (const auto type : {la::Format::bf16, la::Format::int8}) {
    const la::PackedMatrix packed(type, W);
    la::linear_forward<float>(TensorView<float, 2>(y.data(), {M, N}), X, la::Weight<const float>(W).with_decode(packed.ref()));
    compare();
  }
  std::printf("consumer_model: one training step, L_total %.4f; bf16 and int8 products within %.3g of float\n",
              m.L_total, worst);
  return std::isfinite(m.L_total) && worst < 0.5 ? 0 : 1;
}
