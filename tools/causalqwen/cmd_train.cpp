// causalqwen train: trains a CausalQwen model (or its heads alone) with AdamW, logs every step to
// JSONL, draws the curves, checkpoints atomically and resumes bit for bit.
//
//   model    --model DIR (a checkpoint; a base Qwen2 is converted) | --config config.json |
//            --preset tiny|small|qwen2.5-0.5b (from scratch, random weights; vocabulary from
//            --tokenizer: V = K = <NUM>'s id + 1)
//   data     --data FILE.jsonl (tokenized with --tokenizer; a hashed train/validation split) |
//            --synthetic N (N synthetic sentences with numbers, a disjoint validation set) |
//            --features (the synthetic-features mode: heads alone on generated z)
//   run      --out DIR --steps N [--metrics FILE.jsonl] [--resume] and the options of --help
//   recipe   the heads of a model made here (a base converted, --config, --preset): --threshold,
//            --reg-init-gain, --reg-bias median|VALUE (median: of the training data's numbers);
//            --alpha (its schedule: --alpha-end, --alpha-steps), --lambda (--lambda-final,
//            --lambda-steps), --freeze backbone for a first stage; --reg-head cauchy|gaussian|mse (how
//            the regression head is read and trained, written to config.json as reg_head); --lr defaults to 3e-3 from
//            scratch, 1e-4 from a checkpoint and 1e-3 from a checkpoint with --freeze backbone
//   compute  --precision bf16: mixed precision (the decoder layers' and W_cls's products on bf16
//            operands with float sums; weights, gradients, optimiser, attention and losses stay float);
//            --bf16-copies kept|none: whether the layers' weights and W_cls also live as a bf16 copy that
//            AdamW rewrites as it updates them (kept, the default: faster, 2 bytes per weight)
#include "command.hpp"
#include "model_loading.hpp"
#include "numeric_options.hpp"
#include "train_display.hpp"
#include "train_fault_hooks.hpp"

#include <causalqwen/core/threading.hpp>
#include <causalqwen/dist/communicator.hpp>
#include <causalqwen/checkpoint/model_config.hpp>
#include <causalqwen/model/presets.hpp>
#include <causalqwen/train.hpp>
#include <causalqwen/train/batch_list_source.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>
#include <causalqwen/datasets/synthetic_features.hpp>
#include <causalqwen/datasets/synthetic_text_source.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

namespace {

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace ce = causalqwen::eval;
namespace ds = causalqwen::datasets;

struct TrainArgs {
  cqcli::ModelOptions model;
  std::string config, preset, data, out, metrics, curves, schedule = "cosine", freeze = "none", layout = "packed";
  std::string action_mode = "deterministic", optimizer = "adamw", moments = "f32", precision = "f32", bf16_copies = "kept";
  std::string reg_head;  // empty: the model's own (cauchy for a model made here)
  std::size_t synthetic = 0, steps = 200, batch = 8, seq = 64, warmup = 20, accumulation = 1, eval_every = 50,
              eval_batches = 4, checkpoint_every = 100, threads = 2, alpha_steps = 0, hidden = 64, classes = 16,
              keep_tiles_mib = 0;
  bool features = false, resume = false, learn_threshold = false;
  std::optional<double> lr, lambda, lambda_final, reg_init_gain;
  std::string reg_bias;
  std::size_t lambda_steps = 0;
  double min_lr_ratio = 0.1, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, clip = 1.0;
  double alpha_start = -1, alpha_end = 0, min_scale = 0, max_scale = 0, temperature = 1.0, baseline_mae = -1;
  double val_fraction = 0.1;
  std::vector<double> threshold;
  std::uint64_t seed = 1;
};

/// --lr, or its default: 3e-3 for a model made from scratch, 1e-4 for fine-tuning a checkpoint
/// (a base converted, or a CausalQwen one), 1e-3 for its heads alone (--freeze backbone).
double learning_rate(const TrainArgs& a) {
  if (a.lr) return *a.lr;
  if (a.model.model_dir.empty()) return 3e-3;
  return a.freeze == "backbone" ? 1e-3 : 1e-4;
}

/// Checks the recipe's flags among themselves (before anything is loaded).
void check_recipe(const TrainArgs& a) {
  if ((a.lambda_final || a.lambda_steps > 0) && !a.lambda)
    throw cq::DomainError("train: --lambda-final and --lambda-steps anneal --lambda: give --lambda too");
  if (a.lambda && (!(*a.lambda >= 0) || !std::isfinite(*a.lambda)))
    throw cq::DomainError(fmt::format("train: --lambda must be finite and >= 0, got {}", *a.lambda));
  if (a.lambda_final && (!(*a.lambda_final >= 0) || !std::isfinite(*a.lambda_final)))
    throw cq::DomainError(fmt::format("train: --lambda-final must be finite and >= 0, got {}", *a.lambda_final));
  if (!a.reg_bias.empty() && a.reg_bias != "median") {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(a.reg_bias, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != a.reg_bias.size() || !std::isfinite(value))
      throw cq::DomainError(fmt::format("train: --reg-bias must be median or a number, got '{}'", a.reg_bias));
  }
}

/// The head settings of a model made here, from the recipe's flags; --reg-bias median is the
/// median of `train_numbers` (refused when there are none).
cq::checkpoint::ConversionSettings head_settings(const TrainArgs& a, const std::vector<double>& train_numbers) {
  cq::checkpoint::ConversionSettings s;
  if (!a.threshold.empty()) s.ovr_threshold = a.threshold;
  if (a.alpha_start >= 0) s.alpha_gate = a.alpha_start;
  s.reg_init_gain = a.reg_init_gain;
  if (!a.reg_head.empty()) {
    cq::model::RegHead head{};
    if (!cq::model::parse_reg_head(a.reg_head, head))
      throw cq::DomainError(fmt::format("train: --reg-head must be cauchy, gaussian or mse, got '{}'", a.reg_head));
    s.reg_head = head;
  }
  if (a.reg_bias == "median") {
    const auto median = ce::median(train_numbers);
    if (!median)
      throw cq::DomainError(fmt::format("train: --reg-bias median needs numbers in the training data, but {} holds none",
                                        a.data.empty() ? std::string("the synthetic set") : a.data));
    s.reg_bias_init = *median;
  } else if (!a.reg_bias.empty()) {
    s.reg_bias_init = std::stod(a.reg_bias);
  }
  return s;
}

ct::TrainerOptions trainer_options(const TrainArgs& a) {
  ct::TrainerOptions o;
  o.steps = a.steps;
  o.accumulation = a.accumulation;
  o.clip = a.clip;
  cq::optim::LrShape shape{};
  if (!cq::optim::parse_lr_shape(a.schedule, shape))
    throw cq::DomainError(fmt::format("train: --schedule must be constant or cosine, got '{}'", a.schedule));
  o.lr = {shape, learning_rate(a), a.warmup, a.steps, a.min_lr_ratio};
  if (a.lambda) o.lambda = cq::optim::AnnealSchedule{*a.lambda, a.lambda_final.value_or(*a.lambda), a.lambda_steps};
  o.adam = {a.beta1, a.beta2, a.eps, a.weight_decay};
  if (a.optimizer != "adamw" && a.optimizer != "streaming")
    throw cq::DomainError(fmt::format("train: --optimizer must be adamw or streaming, got '{}'", a.optimizer));
  if (a.moments != "f32" && a.moments != "bf16")
    throw cq::DomainError(fmt::format("train: --moments must be f32 or bf16, got '{}'", a.moments));
  o.streaming = a.optimizer == "streaming";
  if (a.keep_tiles_mib > 0 && !o.streaming)
    throw cq::DomainError(fmt::format("train: --keep-tiles {} is memory for --optimizer streaming's tiles; --optimizer {} "
                                      "forms no tiles", a.keep_tiles_mib, a.optimizer));
  if (a.keep_tiles_mib > (std::numeric_limits<std::size_t>::max() >> 20))
    throw cq::DomainError(fmt::format("train: --keep-tiles {} MiB does not fit in a byte count; give at most {}",
                                      a.keep_tiles_mib, std::numeric_limits<std::size_t>::max() >> 20));
  o.keep_tiles_bytes = a.keep_tiles_mib << 20;
  o.moments = a.moments == "bf16" ? cq::optim::MomentStorage::bf16 : cq::optim::MomentStorage::full;
  if (!cq::model::parse_freeze(a.freeze, o.parameters.freeze))
    throw cq::DomainError(fmt::format("train: --freeze must be none, backbone or heads, got '{}'", a.freeze));
  o.parameters.learn_threshold = a.learn_threshold;
  if (a.min_scale > 0) o.scale_clamp.min_scale = a.min_scale;
  if (a.max_scale > 0) o.scale_clamp.max_scale = a.max_scale;
  o.noise.mode = a.action_mode == "sampling" ? cq::model::ActionMode::sampling : cq::model::ActionMode::deterministic;
  o.noise.temperature = a.temperature;
  o.eval_every = a.eval_every;
  o.eval_batches = a.eval_batches;
  o.checkpoint_every = a.checkpoint_every;
  o.out_dir = a.out;
  o.metrics_path = a.metrics;
  cqcli::TrainDisplayOptions display;
  display.metrics_path = !a.metrics.empty() ? std::filesystem::path(a.metrics) : std::filesystem::path(a.out) / "metrics.jsonl";
  display.curves_path = !a.curves.empty() ? std::filesystem::path(a.curves) : std::filesystem::path(a.out) / "curves.svg";
  if (a.baseline_mae >= 0) display.baseline_mae = a.baseline_mae;
  o.observer = cqcli::train_display(display);
  o.resume = a.resume;
  o.seed = a.seed;
  o.comm = cq::dist::Communicator::world();
  cqcli::add_fault_hooks(o.observer, o.comm.rank());
  o.run_settings = {{"lr", learning_rate(a)}, {"schedule", a.schedule}, {"steps", a.steps}, {"batch", a.batch}, {"seq", a.seq},
                    {"accumulation", a.accumulation}, {"seed", a.seed}, {"threads", a.threads},
                    {"optimizer", a.optimizer}, {"moments", a.moments}, {"precision", a.precision},
                    {"processes", o.comm.size()}};
  return o;
}

/// True on the process that prints (process 0 of an mpirun job; the only one otherwise).
bool speaks() { return cq::dist::Communicator::world().is_root(); }

void report(const ct::TrainSummary& s, const std::string& out) {
  if (!speaks()) return;
  const auto comm = cq::dist::Communicator::world();
  fmt::print("trained steps {}..{} in {:.1f} s{}\n", s.first_step, s.last_step, s.seconds,
             comm.size() > 1 ? fmt::format(" on {} processes ({:.1f} s in communication on process 0)", comm.size(),
                                           s.comm_seconds)
                             : std::string());
  fmt::print("optimiser state {:.1f} MiB{}\n", static_cast<double>(s.optimizer_bytes) / 1048576.0,
             comm.size() > 1 ? " per process (its shard of the moments)" : "");
  if (s.first_val && s.last_val)
    fmt::print("validation loss {:.4f} -> {:.4f}; accuracy {:.3f}, <NUM> accuracy {:.3f}, reg MAE {:.4g}\n",
               s.first_val->L_total, s.last_val->L_total, s.last_val->accuracy, s.last_val->num_accuracy,
               s.last_val->reg_mae);
  if (s.checkpoint) fmt::print("checkpoint: {}\n", s.checkpoint->string());
  fmt::print("metrics and curves in {}\n", out);
}

void run_features(const TrainArgs& a) {
  if (!a.reg_bias.empty() || a.reg_init_gain)
    throw cq::DomainError("train: --reg-bias and --reg-init-gain set a token model's heads; --features makes its own");
  if (a.precision != "f32")
    throw cq::DomainError("train: --precision bf16 sets the decoder layers' and W_cls's products; --features trains the heads alone");
  cq::model::RegHead head = cq::model::RegHead::cauchy;
  if (!a.reg_head.empty() && !cq::model::parse_reg_head(a.reg_head, head))
    throw cq::DomainError(fmt::format("train: --reg-head must be cauchy, gaussian or mse, got '{}'", a.reg_head));
  cq::model::CausalConfig c;
  const auto K = a.classes, H = a.hidden;
  c.backbone = {K, H, 2 * H, 1, 2, 1, 1e-6, 1e6};
  c.causal_size = H;
  c.num_classes = K;
  c.num_token_id = static_cast<std::int64_t>(K - 1);
  if (!a.threshold.empty()) c.ovr_threshold = a.threshold;
  c.alpha_gate = a.alpha_start >= 0 ? a.alpha_start : 0.0;
  c.reg_head = head;
  ds::FeatureStoryOptions story;
  story.hidden = H, story.num_classes = K, story.num_token_id = c.num_token_id, story.rows = a.batch * a.seq;
  story.seed = a.seed;
  ds::SyntheticFeatureSource<float> train(story);
  // validation: the same story (prototypes, value map), rows from another stream of the generator
  ds::SyntheticFeatureSource<float> val(story);
  auto val_state = val.state();
  val_state["rng"] = fmt::format("{}", (a.seed + 1) * 0x9E3779B97F4A7C15ULL ^ 0x5A17DA7AULL);
  val.restore(val_state);
  ct::HeadLearner<float> learner(c, train, &val, a.seed, 0.3);
  auto o = trainer_options(a);
  o.alpha = {c.alpha_gate, a.alpha_end, a.alpha_steps};
  ct::Trainer<float> trainer(learner, o);
  report(trainer.run(), a.out);
}

void run_tokens(const TrainArgs& a) {
  std::optional<cq::text::Tokenizer> tokenizer;
  if (auto path = a.model.tokenizer_path()) tokenizer = cq::text::Tokenizer::from_file(path->string());
  if (!tokenizer) throw cq::DomainError("train: --data and --synthetic need a tokenizer (--tokenizer FILE)");

  // the data first: --reg-bias median needs the training targets before the model is made
  ct::CorpusBatchOptions bo;
  bo.batch_size = a.batch, bo.seq_len = a.seq, bo.layout = cq::train::parse_layout(a.layout), bo.seed = a.seed;
  std::unique_ptr<ct::TokenBatchSource<float>> train;
  std::vector<cq::train::BatchData<float>> val_batches;
  std::vector<double> train_numbers;
  if (!a.data.empty()) {
    const auto ds = ct::load_jsonl_dataset(a.data, {a.val_fraction, "causalqwen"});
    auto source = ds.train_source<float>(*tokenizer, bo);
    train_numbers = source->corpus().numbers();
    train = std::move(source);
    if (!ds.validation.empty()) val_batches = ds.validation_batches<float>(*tokenizer, a.batch, a.seq);
  } else {
    const auto tr = ds::synthetic_sentences(ct::DataSplit::train, a.synthetic, a.seed);
    const auto va = ds::synthetic_sentences(ct::DataSplit::validation, std::max<std::size_t>(64, a.synthetic / 10), a.seed);
    auto source = ds::make_synthetic_text_source<float>(*tokenizer, tr, bo);
    train_numbers = source->corpus().numbers();
    train = std::move(source);
    val_batches = ds::synthetic_validation_batches<float>(*tokenizer, va, a.batch, a.seq);
  }
  const auto settings = head_settings(a, train_numbers);

  std::unique_ptr<cq::model::CausalQwen<float>> model;
  nlohmann::json config_base = nlohmann::json::object();
  std::vector<float> lm_head;
  if (!a.model.model_dir.empty()) {
    auto options = a.model.load_options();
    options.conversion = settings;
    auto loaded = cq::checkpoint::load_model<float>(a.model.model_dir, options);
    const bool sets_heads = settings.ovr_threshold || settings.reg_init_gain || settings.reg_bias_init;
    if (!loaded.converted && sets_heads)
      throw cq::DomainError(fmt::format("train: --threshold, --reg-init-gain and --reg-bias set the heads of a model made "
                                        "here, but {} is a CausalQwen checkpoint whose heads are trained already",
                                        a.model.model_dir));
    if (!loaded.converted && settings.reg_head && *settings.reg_head != loaded.model->config().reg_head)
      throw cq::DomainError(fmt::format("train: --reg-head {} differs from the regression head of the CausalQwen checkpoint {} "
                                        "(config.json reg_head: {}); a trained head is continued as it is",
                                        a.reg_head, a.model.model_dir, cq::model::reg_head_name(loaded.model->config().reg_head)));
    if (loaded.converted && speaks())
      fmt::print("converted the base checkpoint {}: threshold {}, alpha {}, regression gain {}, regression bias {:.6g}\n",
                 a.model.model_dir, loaded.model->config().threshold(0), loaded.model->config().alpha_gate,
                 loaded.model->config().reg_init_gain, loaded.model->config().reg_bias_init);
    model = std::move(loaded.model);
    config_base = loaded.config_json;
    lm_head = std::move(loaded.lm_head);
  } else {
    cq::model::CausalConfig c;
    if (!a.config.empty()) {
      const auto file = cq::checkpoint::read_config_json(a.config);
      c = file.config;
      if (file.max_position_embeddings) config_base["max_position_embeddings"] = *file.max_position_embeddings;
    } else {
      c = cq::model::preset_config(a.preset, tokenizer->num_token_id());
    }
    settings.apply(c);
    c.validate("train");
    model = std::make_unique<cq::model::CausalQwen<float>>(c);
    model->init_random(a.seed);
  }
  // the checkpoints record the positions the model was trained on (a model that states its own keeps it)
  if (!config_base.contains("max_position_embeddings")) config_base["max_position_embeddings"] = a.seq;
  if (tokenizer->num_token_id() != model->config().num_token_id)
    throw cq::DomainError(fmt::format("train: the tokenizer's <NUM> id {} differs from the model's {}",
                                      tokenizer->num_token_id(), model->config().num_token_id));
  std::unique_ptr<ct::BatchListSource<float>> val;
  if (!val_batches.empty()) val = std::make_unique<ct::BatchListSource<float>>(std::move(val_batches));
  if (a.alpha_start >= 0) model->set_alpha_gate(a.alpha_start);
  // only a whole AdamW step keeps the copies (StreamingAdamW and a process's shard do not)
  const bool keep_copies = a.bf16_copies == "kept" && a.optimizer == "adamw" && cq::dist::Communicator::world().size() == 1;
  model->set_precision(cq::linalg::parse_precision(a.precision),
                       keep_copies ? cq::linalg::WeightCopies::kept : cq::linalg::WeightCopies::none);
  if (speaks() && a.precision == "bf16" && cq::linalg::bf16_products_on_onednn())
    fmt::print("mixed precision: the products of many rows on {} (our {} kernels for few rows)\n", cq::linalg::bf16_kernel_name(),
               cq::linalg::bf16_own_kernel_name());
  else if (speaks() && a.precision == "bf16" && cq::linalg::bf16_kernel_isa() != cq::linalg::Bf16Isa::avx512_bf16)
    fmt::print(stderr, "note: this CPU has no AVX512-BF16, so --precision bf16 runs {}, slower here than f32\n",
               cq::linalg::bf16_kernel_is_hardware() ? "AVX2 kernels (bf16 widened to float: the float FMAs and more)"
                                                     : "a portable loop");
  if (speaks() && model->bf16_copy_bytes() > 0)
    fmt::print("mixed precision: bf16 copies of the layers' weights and W_cls, {:.1f} MiB (rewritten by each AdamW step)\n",
               static_cast<double>(model->bf16_copy_bytes()) / 1048576.0);
  const double alpha0 = model->config().alpha_gate;
  ct::ModelLearner<float> learner(*model, *train, val.get(), config_base, lm_head);
  auto o = trainer_options(a);
  o.alpha = {alpha0, a.alpha_end, a.alpha_steps};
  if (val) o.eval_batches = std::min(o.eval_batches, val->size());
  if (speaks()) fmt::print("training with lr {:.3g}{}\n", learning_rate(a), a.lr ? "" : " (the default for this start)");
  ct::Trainer<float> trainer(learner, o);
  report(trainer.run(), a.out);
}

const cqcli::Registration reg_train{"train", [](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* sub = app.add_subcommand("train", "Train a CausalQwen model (or its heads alone) with AdamW; crash-safe checkpoints, --resume");
  sub->add_option("--model", a->model.model_dir, "Start from this checkpoint directory (a base Qwen2 is converted)")
      ->check(CLI::ExistingDirectory);
  sub->add_option("--tokenizer", a->model.tokenizer, "tokenizer.json (default: the one in --model)");
  cqcli::add_num_token_id(sub, a->model.num_token_id);
  sub->add_option("--config", a->config, "From scratch: a config.json with the shapes and CausalQwen settings")
      ->check(CLI::ExistingFile);
  sub->add_option("--preset", a->preset, "From scratch: tiny (H 64, 2 layers), small (H 256, 4 layers, FFN 704), qwen2.5-0.5b");
  sub->add_option("--data", a->data, "Training text: JSONL, one {\"text\": ...} per line")->check(CLI::ExistingFile);
  cqcli::add_real(sub, "--val-fraction", a->val_fraction, cqcli::RealRange::half_open(0.0, 1.0), "Share of --data held out for validation (hashed split)");
  cqcli::add_integer(sub, "--synthetic", a->synthetic, {1, cqcli::max_count}, "Train on N synthetic sentences with numbers (validation: disjoint sentences)", false);
  sub->add_flag("--features", a->features, "Synthetic-features mode: the causal heads alone on generated features");
  cqcli::add_integer(sub, "--hidden", a->hidden, {1, std::int64_t{1} << 16}, "--features: feature size H");
  cqcli::add_integer(sub, "--classes", a->classes, {2, std::int64_t{1} << 26}, "--features: number of classes K (<NUM> = K-1)");
  sub->add_option("--out", a->out, "Output directory (checkpoints/, metrics.jsonl, curves.svg)")->required();
  sub->add_option("--metrics", a->metrics, "JSONL metrics log (default: OUT/metrics.jsonl)");
  sub->add_option("--curves", a->curves, "SVG training curves (default: OUT/curves.svg)");
  cqcli::add_real(sub, "--baseline-mae", a->baseline_mae, cqcli::RealRange::non_negative(), "Median baseline's MAE, drawn on the reg-MAE curve", false);
  cqcli::add_integer(sub, "--steps", a->steps, {1, cqcli::max_steps}, "Optimiser steps");
  cqcli::add_integer(sub, "--batch-size", a->batch, {1, cqcli::max_batch}, "Sequences per micro-batch (--features: rows = batch x seq)");
  cqcli::add_integer(sub, "--seq-len", a->seq, {1, cqcli::max_seq}, "Tokens per sequence");
  sub->add_option("--layout", a->layout, "Batches: packed or padded")->capture_default_str();
  cqcli::add_integer(sub, "--accumulation", a->accumulation, {1, cqcli::max_batch}, "Micro-batches per optimiser step");
  cqcli::add_real(sub, "--lr", a->lr, cqcli::RealRange::positive(), "Peak learning rate (default: 3e-3 from scratch, 1e-4 from --model, 1e-3 from --model "
                                 "with --freeze backbone)");
  sub->add_option("--schedule", a->schedule, "constant, or cosine (linear warm-up then cosine)")->capture_default_str();
  cqcli::add_integer(sub, "--warmup", a->warmup, {0, cqcli::max_steps}, "Warm-up steps");
  cqcli::add_real(sub, "--min-lr-ratio", a->min_lr_ratio, cqcli::RealRange::closed(0.0, 1.0), "Cosine floor as a fraction of --lr");
  cqcli::add_real(sub, "--weight-decay", a->weight_decay, cqcli::RealRange::non_negative(), "AdamW decoupled weight decay (not on norms, biases, b_noise, thresholds, direction)");
  cqcli::add_real(sub, "--beta1", a->beta1, cqcli::RealRange::half_open(0.0, 1.0), "AdamW beta1");
  cqcli::add_real(sub, "--beta2", a->beta2, cqcli::RealRange::half_open(0.0, 1.0), "AdamW beta2");
  cqcli::add_real(sub, "--eps", a->eps, cqcli::RealRange::positive(), "AdamW epsilon");
  cqcli::add_real(sub, "--clip", a->clip, cqcli::RealRange::non_negative(), "Global gradient-norm clip (0: none)");
  sub->add_option("--optimizer", a->optimizer,
                  "adamw (a whole gradient arena) or streaming (StreamingAdamW: weight gradients kept as factors and "
                  "formed tile by tile in the update; the same step in less memory)")
      ->capture_default_str();
  cqcli::add_integer(sub, "--keep-tiles", a->keep_tiles_mib,
                  {0, std::int64_t(std::numeric_limits<std::size_t>::max() >> 20), "MiB does not fit in a byte count"},
                  "with --optimizer streaming: MiB for the gradient tiles the norm forms (W_cls's), so that the update "
                  "reads them instead of forming them again (0: none kept, the least memory; W_cls [K, H] needs K*H*4 bytes)");
  sub->add_option("--moments", a->moments, "f32, or bf16 (16-bit moments with stochastic rounding: half the optimiser memory; either optimiser)")
      ->capture_default_str();
  sub->add_option("--precision", a->precision,
                  "f32, or bf16 (mixed precision: the decoder layers' and W_cls's products on bf16 operands with "
                  "float sums; weights, gradients, optimiser and losses stay float)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  sub->add_option("--bf16-copies", a->bf16_copies,
                  "with --precision bf16: kept (a bf16 copy of the layers' weights and W_cls, rewritten by AdamW as it updates "
                  "them, read by the products instead of rounding the float weights each time: faster, 2 bytes per "
                  "weight more; with --optimizer adamw in one process) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"kept", "none"}));
  sub->add_option("--freeze", a->freeze, "none (train everything), backbone (train only the causal.* heads) or heads (train only the backbone)")->capture_default_str();
  sub->add_flag("--learn-threshold", a->learn_threshold, "Also train causal.ovr_threshold (fixed by default)");
  cqcli::add_reals(sub, "--threshold", a->threshold, cqcli::RealRange::any(), "OvR threshold C (one value, or K values) for a model made here "
                                               "(a base converted, --config, --preset)");
  cqcli::add_real(sub, "--reg-init-gain", a->reg_init_gain, cqcli::RealRange::non_negative(), "Xavier gain of the regression weight, for a model made here");
  sub->add_option("--reg-head", a->reg_head,
                  "How the regression head (loc_Y, scale_Y) is read and trained: cauchy (Cauchy NLL), gaussian (Gaussian "
                  "NLL, scale_Y as sigma) or mse (1/2 squared error of loc_Y, no scale); default: the model's (cauchy for a "
                  "model made here); written to config.json as reg_head")
      ->check(CLI::IsMember({"cauchy", "gaussian", "mse"}));
  sub->add_option("--reg-bias", a->reg_bias, "The regression bias of a model made here: median (of the training "
                                              "data's numbers) or a number");
  cqcli::add_real(sub, "--alpha-start,--alpha", a->alpha_start, cqcli::RealRange::closed(0.0, 1.0), "Gate alpha at step 0 (default: the model's alpha_gate)", false);
  cqcli::add_real(sub, "--lambda", a->lambda, cqcli::RealRange::non_negative(), "Weight lambda of the regression loss at step 0 (default: the model's reg_loss_weight)");
  cqcli::add_real(sub, "--lambda-final", a->lambda_final, cqcli::RealRange::non_negative(), "lambda after --lambda-steps (default: --lambda)");
  cqcli::add_integer(sub, "--lambda-steps", a->lambda_steps, {0, cqcli::max_steps}, "Steps of the linear lambda anneal (0: constant lambda)");
  cqcli::add_real(sub, "--alpha-end", a->alpha_end, cqcli::RealRange::closed(0.0, 1.0), "Gate alpha after --alpha-steps");
  cqcli::add_integer(sub, "--alpha-steps", a->alpha_steps, {0, cqcli::max_steps}, "Steps of the linear alpha anneal (0: constant alpha)");
  cqcli::add_real(sub, "--min-scale", a->min_scale, cqcli::RealRange::non_negative(), "Lower clamp of softplus(b_scale) (0: none)");
  cqcli::add_real(sub, "--max-scale", a->max_scale, cqcli::RealRange::non_negative(), "Upper clamp of softplus(b_scale) (0: none)");
  sub->add_option("--action-mode", a->action_mode, "deterministic (noise on the scale) or sampling (noise on the location)")
      ->capture_default_str();
  cqcli::add_real(sub, "--temperature", a->temperature, cqcli::RealRange::non_negative(), "Sampling-mode temperature");
  cqcli::add_integer(sub, "--eval-every", a->eval_every, {0, cqcli::max_steps}, "Validate every N steps (and at the end)");
  cqcli::add_integer(sub, "--eval-batches", a->eval_batches, {0, cqcli::max_batch}, "Validation batches per evaluation");
  cqcli::add_integer(sub, "--checkpoint-every", a->checkpoint_every, {0, cqcli::max_steps}, "Checkpoint every N steps (and at the end)");
  sub->add_flag("--resume", a->resume, "Continue from OUT/checkpoints/LATEST (same options as the first run)");
  cqcli::add_integer(sub, "--seed", a->seed, {0, cqcli::max_seed}, "Seed of the model init, data order and sampling noise");
  auto* threads = cqcli::add_integer(sub, "--threads", a->threads, {1, cqcli::max_threads}, "Threads per process; results are bit-reproducible for a "
                                                          "given count (default 2; with N processes on one machine, "
                                                          "its cores / N)");
  sub->callback([a, threads] {
    if (threads->count() == 0 && cq::dist::Communicator::world().size() > 1) {
      // processes sharing this machine share its cores
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      const unsigned per_machine = local ? static_cast<unsigned>(std::max(1, std::atoi(local))) : 1;
      a->threads = std::max(1u, std::thread::hardware_concurrency() / per_machine);
    }
    cq::set_threads(a->threads);
    const int sources = (!a->data.empty()) + (a->synthetic > 0) + a->features;
    if (sources != 1) throw cq::DomainError("train: give exactly one of --data, --synthetic N, --features");
    check_recipe(*a);
    // --resume: refused early when the checkpoints cannot be resumed; said when there are none yet
    if (a->resume && !ct::latest_checkpoint(a->out) && speaks())
      fmt::print("resume: {} holds no checkpoint yet: starting from step 0\n", (std::filesystem::path(a->out) / "checkpoints").string());
    if (a->features) return run_features(*a);
    const int models = !a->model.model_dir.empty() + !a->config.empty() + !a->preset.empty();
    if (models != 1) throw cq::DomainError("train: give exactly one of --model, --config, --preset");
    run_tokens(*a);
  });
}};

}  // namespace
