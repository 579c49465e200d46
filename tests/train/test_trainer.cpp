// train/: the trainer on tiny sources — learning in the synthetic-features mode, bit-exact resume
// (whole model and heads alone), accumulation, crash-safe checkpoint commits, the log, the
// observer; and the causalqwen program's display of a run (progress, curves).
#include <causalqwen/train.hpp>
#include <doctest/doctest.h>

#include "train_display.hpp"  // tools/causalqwen/

#include "../support/test_support.hpp"
#include "tiny_sources.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / fmt::format("cq_trainer_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// The loss fields of the records, as text (bit-equal values give equal text). Validation records
/// are kept at multiples of 4 only (a run stopped early also validates where it stops).
std::vector<std::string> losses(const fs::path& metrics) {
  std::vector<std::string> out;
  for (const auto& r : ct::read_metrics(metrics))
    if (r["split"] == "train" || r["step"].get<int>() % 4 == 0)
    out.push_back(fmt::format("{} {} {} {} {} {} {}", r["split"].get<std::string>(), r["step"].get<int>(),
                              r["L_total"].dump(), r["L_cls_mean"].dump(), r["L_reg_eff"].dump(),
                              r["reg_mae"].dump(), r.value("grad_norm", 0.0)));
  return out;
}

/// Equal logs, or a message naming the first differing line.
bool same_losses(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) {
      MESSAGE("line ", i, " differs:\n  ", a[i], "\n  ", b[i]);
      return false;
    }
  if (a.size() != b.size()) MESSAGE("lengths ", a.size(), " and ", b.size());
  return a.size() == b.size();
}

/// Options of a run to `steps`; the schedules span 12 steps whatever `steps` is, so that a run
/// stopped early and resumed follows the same schedule as an uninterrupted one.
ct::TrainerOptions base_options(const fs::path& out, std::size_t steps) {
  ct::TrainerOptions o;
  o.steps = steps;
  o.lr = {cq::optim::LrShape::warmup_cosine, 0.02, 3, 12, 0.1};
  o.alpha = {1.0, 0.0, 12};
  o.eval_every = 4;
  o.eval_batches = 2;
  o.out_dir = out;
  return o;
}

/// A whole tiny model trained for `steps` (resuming when asked) on CountingTokenSource.
template <class T>
void train_model(const fs::path& out, std::size_t steps, bool resume, std::size_t checkpoint_every, std::uint64_t seed,
                 bool streaming = false, cq::optim::MomentStorage moments = cq::optim::MomentStorage::full) {
  const auto cfg = cqtest::tiny_config(10.0);
  cq::model::CausalQwen<T> model(cfg);
  model.init_random(seed);
  cqtest::CountingTokenSource<T> train(2, 9, 11, 11), val(2, 9, 11, 11, 1000);
  ct::ModelLearner<T> learner(model, train, &val);
  auto o = base_options(out, steps);
  o.resume = resume;
  o.checkpoint_every = checkpoint_every;
  o.noise.mode = cq::model::ActionMode::sampling;  // exercises the RNG state in checkpoints
  o.noise.temperature = 0.5;
  o.seed = seed;
  o.streaming = streaming;
  o.moments = moments;
  ct::Trainer<T> trainer(learner, o);
  trainer.run();
}

}  // namespace

TEST_CASE("synthetic-features mode: the heads learn <NUM> and its value within seconds") {
  const auto seed = cqtest::test_seed(5, "features learn");
  auto cfg = cqtest::tiny_config(1.0);
  cq::model::CausalConfig c = cfg;
  cqtest::LinearFeatureSource<float> train(64, 8, 11, seed), val(256, 8, 11, seed + 7919);
  ct::HeadLearner<float> learner(c, train, &val, seed, 0.3);
  const auto out = fresh_dir("features");
  ct::TrainerOptions o = base_options(out, 300);
  o.lr = {cq::optim::LrShape::warmup_cosine, 0.05, 10, 300, 0.1};
  o.alpha = {0.5, 0.0, 100};
  o.eval_every = 50;
  o.eval_batches = 1;
  cqcli::TrainDisplayOptions display;
  display.style = cqcli::Progress::Style::off;
  display.metrics_path = out / "metrics.jsonl";
  display.curves_path = out / "curves.svg";
  display.baseline_mae = 3.0;
  o.observer = cqcli::train_display(display);
  ct::Trainer<float> trainer(learner, o);
  const auto s = trainer.run();
  REQUIRE(s.first_val);
  MESSAGE("val first: loss ", s.first_val->L_total, " num acc ", s.first_val->num_accuracy, " mae ", s.first_val->reg_mae);
  MESSAGE("val last:  loss ", s.last_val->L_total, " num acc ", s.last_val->num_accuracy, " mae ", s.last_val->reg_mae);
  CHECK(s.last_val->L_total < s.first_val->L_total);
  CHECK(s.last_val->num_accuracy > 0.9);
  CHECK(s.last_val->reg_mae < 0.5 * s.first_val->reg_mae);
  // the log holds every step and the validations; the curves picture was written
  const auto records = ct::read_metrics(out / "metrics.jsonl");
  CHECK(std::count_if(records.begin(), records.end(), [](auto& r) { return r["split"] == "train"; }) == 300);
  CHECK(std::count_if(records.begin(), records.end(), [](auto& r) { return r["split"] == "val"; }) == 6);
  for (const char* key : {"L_total", "L_cls_mean", "L_reg_eff", "reg_mae", "units_mean_loc", "units_mean_scale",
                          "ovr_prob_sum", "accuracy", "num_accuracy", "mean_P_num", "lr", "alpha", "grad_norm",
                          "tokens_per_s"})
    CHECK_MESSAGE(records.front().contains(key), key);
  CHECK(records.front()["alpha"] == 0.5);
  std::ifstream svg(out / "curves.svg");
  std::stringstream text;
  text << svg.rdbuf();
  CHECK(text.str().find("<polyline") != std::string::npos);
  CHECK(text.str().find("median baseline") != std::string::npos);
  // the final checkpoint is the heads' files
  CHECK(fs::exists(out / "checkpoints" / "step-00000300" / "heads.safetensors"));
  fs::remove_all(out);
}

// float only: in double, the gradients of causal.action.cls.bias and causal.ovr_threshold depend on
// the heap alignment of the head's scratch buffers (an Eigen colwise().sum() whose peeled columns
// are summed in another order), so two processes — or two runs in one process — can differ in
// the last bit; see the README's Training section.
TEST_CASE_TEMPLATE("resume from a checkpoint equals the uninterrupted run bit for bit (whole model)", T, float) {
  const auto seed = cqtest::test_seed(3, "resume model");
  const auto a = fresh_dir("resume_a"), b = fresh_dir("resume_b");
  train_model<T>(a, 10, false, 0, seed);
  train_model<T>(b, 6, false, 3, seed);   // "stops" after step 6 (checkpoints at 3 and 6)
  train_model<T>(b, 10, true, 3, seed);   // resumes at 6
  const auto la = losses(a / "metrics.jsonl"), lb = losses(b / "metrics.jsonl");
  CHECK(la.size() == 12);  // 10 train + validations at 4, 8
  CHECK(same_losses(la, lb));
  // the resumed run's log was cut back to step 6 first: a run that stops at 8 and resumes from 6
  const auto c = fresh_dir("resume_c");
  train_model<T>(c, 8, false, 6, seed);
  train_model<T>(c, 10, true, 6, seed);
  CHECK(same_losses(losses(c / "metrics.jsonl"), la));
  for (const auto& d : {a, b, c}) fs::remove_all(d);
}

TEST_CASE("StreamingAdamW in the trainer: resume is bit-exact (bfloat16 moments) and it tracks AdamW") {
  const auto seed = cqtest::test_seed(5, "resume streaming");
  const auto a = fresh_dir("stream_a"), b = fresh_dir("stream_b"), c = fresh_dir("stream_c");
  train_model<float>(a, 10, false, 0, seed, true, cq::optim::MomentStorage::bf16);
  train_model<float>(b, 6, false, 3, seed, true, cq::optim::MomentStorage::bf16);
  train_model<float>(b, 10, true, 3, seed, true, cq::optim::MomentStorage::bf16);
  const auto la = losses(a / "metrics.jsonl");
  CHECK(la.size() == 12);
  CHECK(same_losses(la, losses(b / "metrics.jsonl")));
  // the same run with AdamW and a gradient arena: the losses agree closely (float rounding in the
  // GEMMs' summation order and the bf16 moments), not bit for bit
  train_model<float>(c, 10, false, 0, seed);
  const auto ra = ct::read_metrics(a / "metrics.jsonl"), rc = ct::read_metrics(c / "metrics.jsonl");
  REQUIRE(ra.size() == rc.size());
  for (std::size_t i = 0; i < ra.size(); ++i) {
    CAPTURE(i);
    CHECK(cqtest::close_rel(ra[i]["L_total"].get<double>(), rc[i]["L_total"].get<double>(), 0.02));
    if (ra[i].contains("grad_norm"))
      CHECK(cqtest::close_rel(ra[i]["grad_norm"].get<double>(), rc[i]["grad_norm"].get<double>(), 0.05));
  }
  // a checkpoint with bfloat16 moments is refused by a run whose moments are float
  CHECK_THROWS_AS(train_model<float>(b, 12, true, 3, seed, true, cq::optim::MomentStorage::full), cq::FormatError);
  for (const auto& d : {a, b, c}) fs::remove_all(d);
}

namespace {
/// A model whose decoder products dominate: H 32, F 64, 2 layers, 4 heads, 2 KV heads.
auto decoder_heavy_config() {
  auto cfg = cqtest::tiny_config(10.0);
  cfg.backbone = {12, 32, 64, 2, 4, 2, 1e-6, 1e6};
  cfg.causal_size = 32;
  return cfg;
}
/// Trains `model` `steps` steps through the Trainer on counting tokens (lr 0.003 after `warmup`
/// steps, cosine to a tenth), validating every `eval_every` steps on `eval_batches` batches;
/// the metrics go to out/metrics.jsonl.
void train_counting(cq::model::CausalQwen<float>& model, const fs::path& out, std::size_t steps, std::size_t warmup,
                    std::size_t eval_every, std::size_t eval_batches, std::uint64_t seed) {
  cqtest::CountingTokenSource<float> train(4, 12, 11, 12), val(4, 12, 11, 12, 1000);
  ct::ModelLearner<float> learner(model, train, &val);
  ct::TrainerOptions o;
  o.steps = steps;
  o.lr = {cq::optim::LrShape::warmup_cosine, 0.003, warmup, steps, 0.1};
  o.eval_every = eval_every;
  o.eval_batches = eval_batches;
  o.out_dir = out;
  o.seed = seed;
  ct::Trainer<float> trainer(learner, o);
  trainer.run();
}
}  // namespace

TEST_CASE("mixed precision: the bf16 weight copies that AdamW keeps give the bits of rounding W in every product") {
  const auto seed = cqtest::test_seed(13, "bf16 copies");
  const auto cfg = decoder_heavy_config();
  for (const auto kernel : {cq::linalg::Bf16Kernel::automatic, cq::linalg::Bf16Kernel::portable}) {
    cq::linalg::set_bf16_kernel(kernel);
    CAPTURE(cq::linalg::bf16_kernel_name());
    auto run = [&](const fs::path& out, cq::linalg::WeightCopies copies) {
      cq::model::CausalQwen<float> model(cfg);
      model.init_random(seed);
      model.set_precision(cq::linalg::Format::bf16, copies);
      CHECK((model.bf16_copy_bytes() > 0) == (copies == cq::linalg::WeightCopies::kept));
      CHECK((model.update_follower() != nullptr) == (copies == cq::linalg::WeightCopies::kept));
      train_counting(model, out, 12, 2, 6, 1, seed);
      // after a step the copies hold the weights (the next forward reads them), until anything else changes them
      CHECK(model.bf16_copies_current() == (copies == cq::linalg::WeightCopies::kept));
      model.params().touch();
      CHECK(!model.bf16_copies_current());
      std::vector<std::string> losses;
      for (const auto& r : ct::read_metrics(out / "metrics.jsonl")) losses.push_back(r["L_total"].dump());
      return std::pair{losses, std::vector<float>(model.params().span().begin(), model.params().span().end())};
    };
    const auto a = fresh_dir("copies_kept"), b = fresh_dir("copies_none");
    const auto [kept_losses, kept_params] = run(a, cq::linalg::WeightCopies::kept);
    const auto [none_losses, none_params] = run(b, cq::linalg::WeightCopies::none);
    CHECK(kept_losses.size() >= 12);  // 12 steps and the validations
    CHECK(kept_losses == none_losses);
    CHECK(std::memcmp(kept_params.data(), none_params.data(), kept_params.size() * sizeof(float)) == 0);
    fs::remove_all(a), fs::remove_all(b);
  }
  cq::linalg::set_bf16_kernel(cq::linalg::Bf16Kernel::automatic);
}

TEST_CASE("mixed precision: 200 steps with bf16 products follow the float run's loss curve") {
  const auto seed = cqtest::test_seed(12, "mixed precision");
  const auto cfg = decoder_heavy_config();
  auto run = [&](const fs::path& out, cq::linalg::Format precision) {
    cq::model::CausalQwen<float> model(cfg);
    model.init_random(seed);
    model.set_precision(precision);
    train_counting(model, out, 200, 10, 50, 2, seed);
    std::vector<double> train_loss, val_loss, first_grad_norm;
    for (const auto& r : ct::read_metrics(out / "metrics.jsonl")) {
      (r["split"] == "train" ? train_loss : val_loss).push_back(r["L_total"].get<double>());
      if (r["split"] == "train" && first_grad_norm.empty()) first_grad_norm.push_back(r["grad_norm"].get<double>());
    }
    return std::tuple{train_loss, val_loss, first_grad_norm.at(0)};
  };
  const auto a = fresh_dir("precision_f32"), b = fresh_dir("precision_bf16");
  const auto [f32_train, f32_val, f32_grad] = run(a, cq::linalg::Format::f32);
  const auto [bf16_train, bf16_val, bf16_grad] = run(b, cq::linalg::Format::bf16);
  REQUIRE(f32_train.size() == 200);
  REQUIRE(bf16_train.size() == 200);
  REQUIRE(f32_val.size() == bf16_val.size());
  // the products did run in bf16: the first step's loss differs from the float one, by rounding only
  CHECK(f32_train[0] != bf16_train[0]);
  CHECK(cqtest::close_rel(bf16_train[0], f32_train[0], 1e-3));
  // the first gradient (forward and both backward products of every layer) agrees to rounding
  CHECK(cqtest::close_rel(bf16_grad, f32_grad, 1e-3));
  MESSAGE("first gradient norm: f32 ", f32_grad, ", bf16 ", bf16_grad);
  // both runs learn: the last 20 steps' mean loss is well below the first 20 steps'
  const auto mean = [](const std::vector<double>& v, std::size_t from) {
    double s = 0;
    for (std::size_t i = from; i < from + 20; ++i) s += v[i];
    return s / 20;
  };
  CHECK(mean(f32_train, 180) < 0.8 * mean(f32_train, 0));
  CHECK(mean(bf16_train, 180) < 0.8 * mean(bf16_train, 0));
  // the curves: every 20-step window's mean, and every validation, within 3 % of the float run's
  double worst = 0;
  for (std::size_t w = 0; w < 200; w += 20) {
    const double rel = std::fabs(mean(bf16_train, w) - mean(f32_train, w)) / mean(f32_train, w);
    worst = std::max(worst, rel);
    CHECK_MESSAGE(rel <= 0.08, "steps ", w, "..", w + 19, ": f32 ", mean(f32_train, w), ", bf16 ", mean(bf16_train, w));
  }
  for (std::size_t i = 0; i < f32_val.size(); ++i) {
    worst = std::max(worst, std::fabs(bf16_val[i] - f32_val[i]) / f32_val[i]);
    CHECK_MESSAGE(cqtest::close_rel(bf16_val[i], f32_val[i], 0.08), "validation ", i, ": f32 ", f32_val[i], ", bf16 ", bf16_val[i]);
  }
  MESSAGE("largest relative difference of the loss curves (20-step means, validations): ", worst);
  for (const auto& d : {a, b}) fs::remove_all(d);
}

TEST_CASE("resume in the synthetic-features mode, with accumulation") {
  const auto seed = cqtest::test_seed(9, "resume features");
  auto run = [&](const fs::path& out, std::size_t steps, bool resume) {
    cqtest::LinearFeatureSource<float> train(16, 8, 11, seed), val(32, 8, 11, seed + 1);
    ct::HeadLearner<float> learner(cqtest::tiny_config(1.0), train, &val, seed, 0.3);
    auto o = base_options(out, steps);
    o.accumulation = 3;
    o.checkpoint_every = 5;
    o.resume = resume;
    o.scale_clamp = {0.5, 50.0};
    o.parameters.learn_threshold = true;
    ct::Trainer<float> t(learner, o);
    t.run();
  };
  const auto a = fresh_dir("fa"), b = fresh_dir("fb");
  run(a, 12, false);
  run(b, 7, false);
  run(b, 12, true);
  CHECK(same_losses(losses(a / "metrics.jsonl"), losses(b / "metrics.jsonl")));
  for (const auto& d : {a, b}) fs::remove_all(d);
}

// (equal to rounding: the heads add each micro-batch's GEMM products into the gradient arena,
// so 2g is summed in another order than g)
TEST_CASE("accumulating A copies of one micro-batch gives the same step as one") {
  const auto seed = cqtest::test_seed(4, "accumulation");
  auto run = [&](std::size_t accumulation) {
    struct Same final : cq::train::FeatureBatchSource<double> {
      cqtest::LinearFeatureSource<double> inner;
      explicit Same(std::uint64_t s) : inner(16, 8, 11, s) {}
      cq::train::FeatureBatch<double> next() override { return cqtest::LinearFeatureSource<double>(inner).next(); }
      nlohmann::json state() const override { return {}; }
      void restore(const nlohmann::json&) override {}
    } source(seed);
    ct::HeadLearner<double> learner(cqtest::tiny_config(1.0), source, nullptr, seed, 0.3);
    auto o = base_options({}, 3);
    o.accumulation = accumulation;
    ct::Trainer<double> t(learner, o);
    t.run();
    return std::vector<double>(learner.params().span().begin(), learner.params().span().end());
  };
  const auto one = run(1);
  for (std::size_t a : {2, 4}) {
    const auto many = run(a);
    double worst = 0;
    for (std::size_t i = 0; i < one.size(); ++i) worst = std::max(worst, std::fabs(one[i] - many[i]));
    CHECK_MESSAGE(worst < 1e-12, "A = ", a, ": largest difference ", worst);
  }
}

TEST_CASE("a crash inside a checkpoint write keeps the previous checkpoint as LATEST") {
  const auto seed = cqtest::test_seed(2, "checkpoint crash");
  const auto out = fresh_dir("crash");
  cqtest::LinearFeatureSource<float> train(8, 8, 11, seed);
  ct::HeadLearner<float> learner(cqtest::tiny_config(1.0), train, nullptr, seed);
  cq::optim::AdamW<float> adam(learner.params().shared_layout());
  ct::TrainerState st;
  st.step = 5;
  st.rng = ct::rng_state(std::mt19937_64(seed));
  ct::write_checkpoint(out, learner, adam, st);
  CHECK(ct::latest_checkpoint(out)->filename() == "step-00000005");
  st.step = 10;
  CHECK_THROWS(ct::write_checkpoint(out, learner, adam, st, [](const fs::path&) { throw std::runtime_error("crash"); }));
  CHECK(ct::latest_checkpoint(out)->filename() == "step-00000005");   // the old one is still named
  CHECK(fs::exists(out / "checkpoints" / "step-00000005" / "optimizer.safetensors"));
  ct::write_checkpoint(out, learner, adam, st);                        // a later complete write
  CHECK(ct::latest_checkpoint(out)->filename() == "step-00000010");
  CHECK(!fs::exists(out / "checkpoints" / "step-00000005"));           // pruned only after the commit
  // a LATEST naming a directory without a state file is refused with the file's name

  {
    std::ofstream(out / "checkpoints" / "LATEST") << "step-00000099\n";
    CHECK(cqtest::error_message<cq::FormatError>([&] { ct::latest_checkpoint(out); }).find("LATEST") !=
          std::string::npos);
  }
  // a LATEST naming anything but step-<digits> (a path outside, an empty line) is refused
  for (const char* bad : {"../../etc", "step-", "step-12/../../x", "", "/tmp"}) {
    std::ofstream(out / "checkpoints" / "LATEST") << bad << "\n";
    CHECK(cqtest::error_message<cq::FormatError>([&] { ct::latest_checkpoint(out); })
              .find("expected a checkpoint name such as step-00000120") != std::string::npos);
  }
  // LATEST is read through the line reader: a line past its limit, and a read error (LATEST a
  // directory), are refused naming the file, never taken for an empty name
  const auto latest = (out / "checkpoints" / "LATEST").string();
  std::ofstream(latest) << std::string(ct::latest_max_line_bytes + 1, 's') << "\n";
  CHECK(cqtest::error_message<cq::FormatError>([&] { ct::latest_checkpoint(out); }) ==
        latest + ":1: the line is longer than 4096 bytes, the limit of a line");
  fs::remove(latest);
  fs::create_directory(latest);
  CHECK(cqtest::error_message<cq::FormatError>([&] { ct::latest_checkpoint(out); })
            .starts_with(latest + ": read error after line 0"));
  fs::remove(latest);
  std::ofstream(latest) << "step-00000010\r\n";  // a '\r' before the '\n' is dropped
  CHECK(ct::latest_checkpoint(out)->filename() == "step-00000010");
  fs::remove_all(out);
}

TEST_CASE("resume trusts nothing: checkpoints without LATEST are refused, a state's step must be its folder's") {
  const auto seed = cqtest::test_seed(3, "resume checks");
  const auto out = fresh_dir("resume_checks");
  CHECK(!ct::latest_checkpoint(out));  // no checkpoint at all: nothing to resume, a fresh start
  cqtest::LinearFeatureSource<float> train(8, 8, 11, seed);
  ct::HeadLearner<float> learner(cqtest::tiny_config(1.0), train, nullptr, seed);
  cq::optim::AdamW<float> adam(learner.params().shared_layout());
  ct::TrainerState st;
  st.step = 20;
  st.rng = ct::rng_state(std::mt19937_64(seed));
  ct::write_checkpoint(out, learner, adam, st);
  const auto dir = *ct::latest_checkpoint(out);
  CHECK(ct::read_checkpoint(dir, learner, adam).step == 20);
  auto j = ct::read_trainer_state(dir / "trainer_state.json").to_json();
  for (const std::uint64_t step : {std::uint64_t{999}, std::uint64_t{1} << 63, std::uint64_t{0}}) {
    j["step"] = step;
    std::ofstream(dir / "trainer_state.json") << j.dump();
    CHECK(cqtest::error_message<cq::FormatError>([&] { ct::read_checkpoint(dir, learner, adam); }) ==
          fmt::format("{}: field 'step' is {}, but the checkpoint's directory is step-00000020",
                      (dir / "trainer_state.json").string(), step));
  }
  fs::remove(out / "checkpoints" / "LATEST");
  CHECK(cqtest::error_message<cq::FormatError>([&] { ct::latest_checkpoint(out); })
            .find("checkpoints: holds 1 checkpoint directories (step-00000020) but no LATEST") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("read_metrics: a missing log is empty, a half-written line skipped, a read error refused") {
  const auto out = fresh_dir("metrics_read");
  CHECK(ct::read_metrics(out / "absent.jsonl").empty());
  const auto log = out / "metrics.jsonl";
  std::ofstream(log) << "{\"split\": \"train\", \"step\": 1}\r\n\n{\"split\": \"train\", \"step\": 2}\n{\"split\": \"tr";
  const auto records = ct::read_metrics(log);
  REQUIRE(records.size() == 2);
  CHECK(records[1]["step"] == 2);
  ct::truncate_metrics(log, 1);
  CHECK(ct::read_metrics(log).size() == 1);
  // a log that is a directory is a read error naming it, not an empty log
  fs::create_directory(out / "dir.jsonl");
  CHECK(cqtest::error_message<cq::FormatError>([&] { ct::read_metrics(out / "dir.jsonl"); })
            .starts_with((out / "dir.jsonl").string() + ": read error after line 0"));
  fs::remove_all(out);
}

TEST_CASE("progress degrades to plain lines off a terminal") {
  std::FILE* f = std::tmpfile();
  cqcli::Progress p(40, 0, f, cqcli::Progress::Style::lines);
  for (std::size_t s = 1; s <= 40; ++s) p.update(s, 1.5, 0.5, 0.25, 1000);
  p.message("validation");
  p.finish();
  std::rewind(f);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find("step  1/40 loss 1.5000 acc 0.500 reg MAE 0.25 1000 tok/s ETA") != std::string::npos);
  CHECK(text.find("step 40/40") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 22);  // steps 1, 2, 4, …, 40 and the message
}

TEST_CASE("the trainer tells its observer the start, every step's beginning and end, every validation, every "
          "checkpoint's commit and the end") {
  const auto seed = cqtest::test_seed(3, "observer");
  const auto out = fresh_dir("observer");
  std::vector<std::string> events;
  auto observe = [&](std::size_t steps, bool resume) {
    cq::model::CausalQwen<float> model(cqtest::tiny_config(10.0));
    model.init_random(seed);
    cqtest::CountingTokenSource<float> train(2, 9, 11, 11), val(2, 9, 11, 11, 1000);
    ct::ModelLearner<float> learner(model, train, &val);
    auto o = base_options(out, steps);
    o.resume = resume;
    o.checkpoint_every = 4;
    o.observer.on_start = [&](const ct::RunStart& s) {
      events.push_back(fmt::format("start {}/{}{}", s.first_step, s.total_steps, s.resumed_from ? " resumed" : ""));
    };
    o.observer.on_step = [&](const ct::StepReport& r) {
      CHECK(r.total_steps == steps);
      CHECK(std::isfinite(r.metrics.L_total));
      CHECK(r.lr > 0);
      events.push_back(fmt::format("step {}", r.step));
    };
    o.observer.on_step_begin = [&](std::size_t step) { events.push_back(fmt::format("begin {}", step)); };
    o.observer.on_validation = [&](const ct::ValidationReport& v) { events.push_back(fmt::format("val {}", v.step)); };
    o.observer.on_checkpoint_commit = [&](std::size_t step) {
      // the checkpoint's files are written; LATEST still names the one before (none at first)
      CHECK(fs::exists(ct::checkpoints_dir(out) / ct::checkpoint_name(step) / "trainer_state.json"));
      std::string latest;
      if (std::ifstream in(ct::checkpoints_dir(out) / "LATEST"); in) std::getline(in, latest);
      CHECK(latest != ct::checkpoint_name(step));
      events.push_back(fmt::format("commit {}", step));
    };
    o.observer.on_finish = [&] { events.push_back("finish"); };
    ct::Trainer<float> trainer(learner, o);
    trainer.run();
  };
  observe(5, false);
  observe(6, true);  // resumes from step 5's final checkpoint
  const std::vector<std::string> expected = {
      "start 0/5", "begin 0", "step 1", "begin 1", "step 2", "begin 2", "step 3", "begin 3", "step 4", "val 4",
      "commit 4",  "begin 4", "step 5", "val 5",   "commit 5", "finish",
      "start 5/6 resumed", "begin 5", "step 6", "val 6", "commit 6", "finish"};
  CHECK(events == expected);
  fs::remove_all(out);
}
