// Seed 001's diagnosis, put to the test: the regression loss is gated by P(<NUM>) = P(S_<NUM> > C),
// so with ovr_threshold C = 100 (far above loc_S at initialisation) the gate starts near 0 and —
// the seed says — the regression barely learns in the first steps, while with C = 10 it learns.
//
// Two runs side by side: a tiny CausalQwen (H 64, 2 layers, BPE vocabulary of 384 trained
// in-process on the synthetic sentences) trained from scratch with AdamW, identical in everything
// but the threshold (α = 0, same seed, same batches). Printed per window of steps: P(<NUM>) at
// <NUM> targets, L_reg_eff, reg MAE and <NUM> accuracy of each run (training batches), then which
// parts of the diagnosis hold.
// Exit code: 1 unless the gate part holds (initial P(<NUM>) < 0.05 with C = 100, > 0.2 with
// C = 10); with --require-learning also 1 unless the C = 100 run's reg-MAE improvement is less
// than half the C = 10 run's (reg MAE of the first window of steps minus the last's).
//
//   build/bin/threshold_study [--steps 60] [--every 10] [--lr 3e-3] [--require-learning]
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/optim/adamw.hpp>
#include <causalqwen/optim/clip.hpp>
#include <causalqwen/text/bpe_trainer.hpp>
#include <causalqwen/train/synthetic_text_source.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace tr = causalqwen::train;

namespace {

struct StudyOptions {
  std::size_t steps = 60, every = 10;
  double lr = 3e-3;
  bool require_learning = false;  // --require-learning: exit 1 unless the regression part holds too
};

/// One training run of a tiny CausalQwen from scratch with a given OvR threshold.
struct Run {
  cq::model::CausalQwen<float> model;
  std::unique_ptr<cq::train::CorpusBatchSource<float>> source;
  cq::optim::AdamW<float> adam;
  cq::Arena<float> grads;
  cq::model::CausalQwen<float>::Cache cache;

  Run(const cq::model::CausalConfig& cfg, const cq::text::Tokenizer& tok, const std::vector<tr::SyntheticSentence>& data)
      : model(cfg), source(tr::make_synthetic_text_source<float>(tok, data, {.batch_size = 8, .seq_len = 64, .seed = 5})),
        adam(model.params().shared_layout()), grads(model.make_gradients()) {
    model.init_random(/*seed=*/11);
  }

  /// One step (forward, backward, clip to 1, AdamW); returns the step's training metrics.
  cq::model::HeadMetrics step(double lr) {
    grads.zero();
    const auto batch = source->next();
    const auto m = model.forward_backward(batch.view(), cache, grads);
    cq::optim::clip_grad_norm(grads, 1.0, adam.rules());
    adam.step(model.params(), grads, lr);
    return m;
  }
};

/// The tiny model's config for threshold `c` (α = 0, λ = 1, regression bias at the median).
cq::model::CausalConfig model_config(const cq::text::Tokenizer& tok, double median, double c) {
  cq::model::CausalConfig cfg;
  cfg.num_token_id = tok.num_token_id();
  cfg.num_classes = static_cast<std::size_t>(cfg.num_token_id) + 1;
  cfg.backbone = {(cfg.num_classes + 63) / 64 * 64, 64, 128, 2, 4, 2, 1e-6, 1e4};
  cfg.causal_size = 64;
  cfg.ovr_threshold = {c};
  cfg.alpha_gate = 0.0;
  cfg.reg_bias_init = median;
  return cfg;
}

/// Metrics averaged over a window of steps.
struct Window {
  double p_num = 0, l_reg = 0, mae = 0, num_acc = 0;
  std::size_t n = 0;
  void add(const cq::model::HeadMetrics& m) { p_num += m.mean_P_num, l_reg += m.L_reg_eff, mae += m.reg_mae, num_acc += m.num_accuracy, ++n; }
  Window mean() const {
    const double k = n ? 1.0 / double(n) : 0.0;
    return {p_num * k, l_reg * k, mae * k, num_acc * k, n};
  }
};

/// Parses --steps/--every/--lr.
StudyOptions parse(int argc, char** argv) {
  StudyOptions o;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--steps") o.steps = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--every") o.every = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--lr") o.lr = std::strtod(argv[i + 1], nullptr);
  }
  for (int i = 1; i < argc; ++i) o.require_learning |= std::string(argv[i]) == "--require-learning";
  return o;
}

}  // namespace

/// Runs both thresholds side by side, prints the table and the conclusion; exit 0 when the effect holds.
int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  const auto data = tr::synthetic_sentences(tr::DataSplit::train, 4000, /*seed=*/3);
  const auto ideal = tr::ideal_scores(data, data);
  const auto tok = cq::text::train_bpe(tr::texts_of(data), {.vocab_size = 384}).tokenizer();
  Run high(model_config(tok, ideal.train_median, 100.0), tok, data), low(model_config(tok, ideal.train_median, 10.0), tok, data);
  fmt::print("tiny CausalQwen (H 64, 2 layers, K {}) from scratch on synthetic text, B 8 x S 64, AdamW lr {}, alpha 0;\n"
             "training-batch metrics averaged over each window of {} steps (step 1 alone)\n\n",
             high.model.config().num_classes, o.lr, o.every);
  fmt::print("{:>5} | {:^37} | {:^37}\n", "", "ovr_threshold = 100", "ovr_threshold = 10");
  fmt::print("{:>5} | {:>8} {:>9} {:>8} {:>8} | {:>8} {:>9} {:>8} {:>8}\n", "steps", "P(<NUM>)", "L_reg_eff", "reg MAE",
             "NUM acc", "P(<NUM>)", "L_reg_eff", "reg MAE", "NUM acc");
  Window wh, wl, first_h, first_l, early_h, early_l, last_h, last_l;
  for (std::size_t s = 1; s <= o.steps; ++s) {
    wh.add(high.step(o.lr));
    wl.add(low.step(o.lr));
    if (s != 1 && s % o.every != 0) continue;
    const auto h = wh.mean(), l = wl.mean();
    fmt::print("{:>5} | {:8.4f} {:9.4f} {:8.3f} {:8.3f} | {:8.4f} {:9.4f} {:8.3f} {:8.3f}\n",
               s == 1 ? std::string("1") : fmt::format("{}-{}", std::max<std::size_t>(2, s - o.every + 1), s), h.p_num, h.l_reg, h.mae, h.num_acc,
               l.p_num, l.l_reg, l.mae, l.num_acc);
    if (s == 1) first_h = h, first_l = l;
    if (s == o.every) early_h = h, early_l = l;
    last_h = h, last_l = l;
    wh = {}, wl = {};
  }
  const double gain_h = early_h.mae - last_h.mae, gain_l = early_l.mae - last_l.mae;
  const bool gate = first_h.p_num < 0.05 && first_l.p_num > 0.2;
  const bool learns = gain_l > 0 && gain_h < 0.5 * gain_l;
  fmt::print("\nreg MAE, first window -> last window: threshold 100: {:.3f} -> {:.3f} ({:+.3f}); threshold 10: {:.3f} -> {:.3f} ({:+.3f})\n",
             early_h.mae, last_h.mae, -gain_h, early_l.mae, last_l.mae, -gain_l);
  fmt::print("gate: {} (initial P(<NUM>) {:.4f} with threshold 100, {:.4f} with 10)\n", gate ? "REPRODUCED" : "NOT reproduced",
             first_h.p_num, first_l.p_num);
  fmt::print("regression: {} (the threshold-100 run {} clearly less than the threshold-10 run)\n",
             learns ? "REPRODUCED" : "NOT reproduced", learns ? "learns" : "does not learn");
  const bool holds = gate && (learns || !o.require_learning);
  fmt::print("conclusion: {}\n",
             learns ? "seed 001 reproduced: the closed gate keeps the regression from learning; lower ovr_threshold"
                    : "the gate starts near 0 with threshold 100, but with AdamW and alpha 0 the regression does not learn "
                      "clearly faster with threshold 10 (both gates close as the classes learn)");
  return holds ? 0 : 1;
}
