// A compile-time-checked experiment: a tiny CausalQwen whose shapes are compile-time constants,
// built, run forward and backward on a toy batch. The compiler checks the shapes (C = H, heads divide
// hidden, KV heads divide heads, <NUM> is a class) and the Cauchy algebra of the heads
// (a CauchyTensor copied from the abduction network's view: linear maps only of independent tensors). The refused variants below are
// failtests in tests/failtests/ that must fail with exactly the quoted sentence.
#include <causalqwen/model.hpp>

#include <fmt/core.h>

namespace cqm = causalqwen::model;

// vocabulary 16, hidden 8, FFN 16, 2 layers, 4 heads, 2 KV heads, K = 15 classes, <NUM> = 14
constexpr cqm::StaticConfig tiny{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_layers = 2,
                                 .num_heads = 4, .num_kv_heads = 2, .causal_size = 8, .num_classes = 15,
                                 .num_token_id = 14};
// The same with .num_heads = 3:
//   "causalqwen::StaticConfig: the hidden size must be divisible by the number of attention heads."
// with .num_kv_heads = 3:
//   "... the number of attention heads must be divisible by the number of key/value heads ..."
// with .causal_size = 6:
//   "causalqwen::StaticConfig: the causal size C must equal the hidden size H, ..."
// with .num_token_id = 15:
//   "causalqwen::StaticConfig: the <NUM> token id must be one of the OvR classes."
// without .num_layers (a field left out is 0):
//   "causalqwen::StaticConfig: every dimension must be positive."

int main() {
  cqm::CausalQwen<double, tiny> model;
  static_assert(decltype(model)::causal_size == decltype(model)::hidden_size);
  model.init_random(/*seed=*/1, /*std=*/0.1);

  // A toy batch: "price is <NUM> dollars" twice, the number's value beside its <NUM>.
  const std::int64_t B = 2, S = 4;
  std::vector<std::int64_t> ids{3, 5, 14, 7, 3, 5, 14, 7}, labels{5, 14, 7, -100, 5, 14, 7, -100};
  std::vector<double> numbers{0, 0, 42.0, 0, 0, 0, 17.5, 0}, targets{0, 42.0, 0, 0, 0, 17.5, 0, 0};
  const cqm::Batch<double> batch{{ids.data(), {B, S}}, {numbers.data(), {B, S}}, {}, {labels.data(), {B, S}},
                                 {targets.data(), {B, S}}, {}};

  typename decltype(model)::Cache cache;
  auto grads = model.make_gradients();
  const auto m = model.train_step(batch, cache, grads);
  fmt::print("L_total = {:.4f} (L_cls_mean {:.4f} + L_reg_eff {:.4f}), P(<NUM>) at targets {:.4f}\n", m.L_total,
             m.L_cls_mean, m.L_reg_eff, m.mean_P_num);
  double norm = 0;
  for (auto g : grads.span()) norm += g * g;
  fmt::print("gradient norm over {} parameters: {:.4g}\n", model.layout().count(), std::sqrt(norm));

  // The heads' algebra as types: U is independent, the action's linear map makes it marginal.
  const auto& h = cache.head;
  const std::size_t C = tiny.causal_size;
  // U copied from the abduction network's typed view: independent because the algebra says so
  const causalqwen::CauchyTensor U(cqm::Abduction<double>::individuals(h.abduction, C));
  const xt::xtensor<double, 1> b_noise = xt::adapt(std::vector<double>(model.params().slot_span("causal.action.b_noise").begin(),
                                                                       model.params().slot_span("causal.action.b_noise").end()),
                                                   {C});
  const auto UA = causalqwen::add_noise(U, b_noise);  // still independent
  const xt::xtensor<double, 2> w_reg = xt::adapt(std::vector<double>(model.params().slot_span("causal.action.reg.weight").begin(),
                                                                     model.params().slot_span("causal.action.reg.weight").end()),
                                                 {1ul, C});
  const auto Y = causalqwen::linear(w_reg, xt::xtensor<double, 1>{model.params().slot_span("causal.action.reg.bias")[0]}, UA);
  static_assert(decltype(Y)::kind == causalqwen::Kind::marginal);
  // auto Y2 = causalqwen::linear(w_reg, xt::xtensor<double, 1>{0.0}, Y);   refused: "fuse the weights first ..."
  // auto bad = exp(U);                                                       refused: "exp of a Cauchy tensor is not Cauchy ..."
  fmt::print("the regression head's Y for the first position: Cauchy({:.4f}, {:.4f}); the model's loc_Y = {:.4f}, scale_Y = {:.4f}\n",
             Y.loc()(0, 0), Y.scale()(0, 0), h.regression.loc_Y[0], h.regression.scale_Y[0]);
  return std::fabs(Y.loc()(0, 0) - h.regression.loc_Y[0]) < 1e-9 && std::fabs(Y.scale()(0, 0) - h.regression.scale_Y[0]) < 1e-9 ? 0 : 1;
}
