// causalqwen calibrate --model DIR --data CAL.jsonl [--levels 0.5,0.8,0.9,0.95]
//                      [--method conformal|temperature] [--by group] [--min-group-size N]
//                      [--tokenizer FILE] [--batch-size B] [--seq-len S] [--dtype f32|f64]
//                      [--threads N] [--plain]
//
// Recalibrates the central intervals of a checkpoint's number predictions on calibration
// sentences ({"text": ..., "group": ...} per line; keep them apart from the sentences the
// intervals are judged on): every <NUM> target is predicted teacher-forced, as `eval` does, and
// eval::fit_interval_calibration turns the scores s = |y − loc_Y|/scale_Y into one multiplier of
// scale_Y per level (split conformal: the ⌈(n + 1)·p⌉-th smallest s over tan(π·p/2)), or one
// temperature for every level (--method temperature: the maximum-likelihood factor), per group
// with --by group (groups of fewer than --min-group-size numbers use the pooled multipliers). The
// result is written atomically as DIR/calibration.json, which `eval` and `generate` then apply to
// every interval they print. A level that needs more numbers than the file has (p = 0.9 needs 9,
// 0.95 needs 19) is refused. The intervals are the model's regression head's (config.json
// reg_head): Cauchy loc_Y ± m·scale_Y·tan(π·p/2), or Gaussian loc_Y ± m·scale_Y·Φ⁻¹(½ + p/2)
// (calibration.json then says "distribution": "gaussian"); a point head (mse) has no interval
// to calibrate and is refused.
#include "command.hpp"
#include "numeric_options.hpp"
#include "model_loading.hpp"
#include "number_forecasts.hpp"
#include "progress.hpp"

#include <causalqwen/core/threading.hpp>
#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/eval/number_scores.hpp>
#include <causalqwen/train/evaluate.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

namespace {

namespace cq = causalqwen;
namespace ce = causalqwen::eval;
namespace ct = causalqwen::train;

struct CalibrateOptions {
  cqcli::ModelOptions model;
  std::string data, method = "conformal", by, dtype = "f32";
  std::vector<double> levels{0.5, 0.8, 0.9, 0.95};
  std::size_t min_group_size = ce::default_min_group_size, batch = 16, seq = 128, threads = 2;
  bool plain = false;
};

template <class T>
void run_calibrate(const CalibrateOptions& o) {
  const auto tok_path = o.model.tokenizer_path();
  if (!tok_path)
    throw cq::FormatError(fmt::format("{}: no tokenizer.json in the model directory; give --tokenizer FILE", o.model.model_dir));
  const auto tok = cq::text::Tokenizer::from_file(tok_path->string());
  auto loaded = o.model.load<T>();
  auto& model = *loaded.model;
  cqcli::require_matching(tok, *tok_path, model.config(), o.model.model_dir);
  if (loaded.max_position_embeddings && o.seq > *loaded.max_position_embeddings)
    throw cq::FormatError(fmt::format("--seq-len {} must be at most the model's max_position_embeddings {} (config.json)",
                                      o.seq, *loaded.max_position_embeddings));
  cqcli::require_interval_head(model.config(), o.model.model_dir, "calibrate (it rescales the intervals of the scale)");
  const auto family = cqcli::forecast_family(model.config());
  const bool by_group = o.by == "group";
  const auto records = ct::read_jsonl_records(o.data, "text", "group");
  if (by_group && records.groups.empty())
    throw cq::FormatError(fmt::format("{}: --by group needs a \"group\" on the lines, and none has one", o.data));
  const auto corpus = ct::encode_corpus(tok, records.texts);
  const auto batches = ct::evaluation_batches<T>(corpus, o.batch, o.seq, ct::BatchLayout::padded);
  fmt::print("calibrate: {} texts from {}, {} numbers, in {} batches ({})\n", records.texts.size(), o.data,
             corpus.numbers().size(), batches.size(), o.dtype);

  cqcli::NumberForecasts numbers;
  ct::EvaluationOptions options;
  cqcli::Progress progress(batches.size(), 0, stdout, o.plain ? cqcli::Progress::Style::lines : cqcli::Progress::Style::automatic);
  progress.set_label("batch");
  options.on_batch = [&](std::size_t done, std::size_t) { progress.show(done, ""); };
  ct::evaluate(model, batches, numbers.collector(o.batch, records.groups), options);
  progress.finish();
  if (numbers.left_out > 0)
    fmt::print("WARNING: {} predictions are not finite (a diverged model?) and are left out\n", numbers.left_out);
  if (numbers.forecasts.empty())
    throw cq::FormatError(fmt::format("{}: no number of its {} lines was scored, so there is nothing to calibrate on",
                                      o.data, records.texts.size()));

  const auto method = o.method == "temperature" ? ce::CalibrationMethod::temperature : ce::CalibrationMethod::conformal;
  ce::IntervalCalibration c;
  try {
    c = ce::fit_interval_calibration(numbers.forecasts, by_group ? numbers.group : std::vector<std::string>{}, o.levels,
                                     method, family, o.min_group_size);
  } catch (const cq::DomainError& e) {
    throw cq::FormatError(fmt::format("{}: {} numbers scored: {}", o.data, numbers.forecasts.size(), e.what()));
  }
  c.data = std::filesystem::absolute(o.data).string();

  fmt::print("\n{} calibration of the intervals loc_Y ± m·scale_Y·{} on {} numbers:\n", ce::method_name(method),
             family == ce::ForecastFamily::gaussian ? "Φ⁻¹(½ + p/2) (Gaussian head)" : "tan(π·p/2)", c.pooled.numbers);
  const auto before = ce::score_forecasts(numbers.forecasts, family, o.levels, std::nullopt);
  const auto after = ce::score_grouped(numbers.forecasts, by_group ? numbers.group : std::vector<std::string>{},
                                       family, o.levels, std::nullopt, &c)
                         .overall;
  fmt::print("  {:>6}  {:>12}  {:>18}  {:>18}\n", "level", "multiplier", "coverage before", "coverage after");
  for (std::size_t i = 0; i < o.levels.size(); ++i)
    fmt::print("  {:>5.0f}%  {:>12.4g}  {:>18.3f}  {:>18.3f}\n", 100 * o.levels[i], c.multiplier(o.levels[i]),
               *before.levels[i].coverage, *after.levels[i].coverage);
  if (by_group) {
    std::set<std::string> seen(numbers.group.begin(), numbers.group.end());
    fmt::print("  by group (at least {} numbers for multipliers of their own):\n", o.min_group_size);
    for (const auto& name : seen) {
      const auto it = c.groups.find(name);
      std::string multipliers;
      for (double p : o.levels) multipliers += fmt::format(" {:.4g}", c.multiplier(p, &name));
      fmt::print("    {:<20} {:>7} numbers  {}:{}\n", name,
                 std::count(numbers.group.begin(), numbers.group.end(), name),
                 it == c.groups.end() ? "pooled" : "own", multipliers);
    }
  }
  fmt::print("  (coverage here is on the calibration numbers themselves; judge it on other sentences with eval)\n");
  ce::save_interval_calibration(c, o.model.model_dir);
  fmt::print("calibration -> {}\n", (std::filesystem::path(o.model.model_dir) / ce::calibration_file_name).string());
}

const cqcli::Registration reg_calibrate{"calibrate", [](CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* sub = app.add_subcommand("calibrate", "Recalibrate a checkpoint's number intervals on held-out sentences "
                                              "(split conformal or a temperature), written as DIR/calibration.json");
  o->model.add_to(sub);
  sub->add_option("--data", o->data, "JSONL of calibration sentences, one {\"text\": ..., \"group\": ...} per line")
      ->required()
      ->check(CLI::ExistingFile);
  cqcli::add_reals(sub, "--levels", o->levels, cqcli::RealRange::open(0.0, 1.0),
                   "central interval levels, increasing (default 0.5,0.8,0.9,0.95)")
      ->delimiter(',');
  sub->add_option("--method", o->method, "conformal (one multiplier per level) | temperature (one scale factor, by NLL)")
      ->capture_default_str()
      ->check(CLI::IsMember({"conformal", "temperature"}));
  sub->add_option("--by", o->by, "group: one calibration per \"group\" of the lines (Mondrian), small groups pooled")
      ->check(CLI::IsMember({"group"}));
  cqcli::add_integer(sub, "--min-group-size", o->min_group_size, {1, cqcli::max_count},
                     "fewest numbers a group needs for multipliers of its own");
  cqcli::add_integer(sub, "--batch-size", o->batch, {1, std::int64_t{1} << 16}, "texts per batch");
  cqcli::add_integer(sub, "--seq-len", o->seq, {1, std::int64_t{1} << 20}, "tokens per text (longer texts are cut)");
  sub->add_option("--dtype", o->dtype, "compute type: f32 or f64")->capture_default_str()->check(CLI::IsMember({"f32", "f64"}));
  cqcli::add_integer(sub, "--threads", o->threads, {1, cqcli::max_threads}, "threads");
  sub->add_flag("--plain", o->plain, "plain progress lines instead of a bar");
  sub->callback([o] {
    cqcli::check_levels(o->levels);
    cq::set_threads(o->threads);
    if (o->dtype == "f64") return run_calibrate<double>(*o);
    run_calibrate<float>(*o);
  });
}};

}  // namespace
