// causalqwen eval --model DIR --data FILE.jsonl [--tokenizer FILE] [--out REPORT.json]
//                 [--plot calibration.svg] [--baseline VALUE | --baseline-data TRAIN.jsonl]
//                 [--batch-size B] [--seq-len S] [--dtype f32|f64] [--threads N] [--plain]
//                 [--predictions FILE.jsonl] [--no-calibration] [--selective-level P]
//
// Scores a checkpoint on every line of a JSONL file ({"text": "...", "group": "..."}; the group
// is optional), teacher-forced, in batches of whole texts (a text longer than --seq-len tokens is
// cut, and the cut is reported): the loss terms as in training, the next-token statistics, and
// the calibration of the Cauchy predictions of numbers (train::evaluate, eval/calibration.hpp),
// overall and per group. --out writes the report as JSON, --plot draws coverage against nominal
// level and the PIT histogram (SVG). Refused with one line naming the file (and line): an empty
// or number-free JSONL, a group that is not a string, a tokenizer whose <NUM> or vocabulary does
// not fit the model.
//
// Proper scores (eval/number_scores.hpp), overall and per group: NLL (the headline), the
// closed-form CRPS (mean, median, trimmed mean), the pinball loss over τ = 0.05…0.95, the interval
// score at each level, and their skill against a median baseline: --baseline / --baseline-data,
// else the median of the scored numbers themselves (named so in the report). When the model
// directory holds calibration.json (`causalqwen calibrate`), the intervals are scored before and
// after its recalibration (--no-calibration: before only). --predictions writes one JSON line per
// scored number {"line", "text", "y", "loc", "scale", "p_num", "group"}, from which every score
// can be recomputed. --plot also draws the risk–coverage curve beside the calibration picture
// (PLOT-risk-coverage.svg): the MAE and coverage of the numbers kept as the widest intervals at
// --selective-level (default 0.9) are set aside.
//
// Every score reads the forecasts as the model's regression head does (config.json reg_head):
// Cauchy (the default), Gaussian N(loc_Y, scale_Y²) (its NLL, closed-form CRPS, Φ⁻¹ intervals,
// PIT), or a point loc_Y (mse: MAE, RMSE, CRPS = |y − loc_Y| and the pinball loss; no NLL, no
// interval, no PIT, no risk–coverage curve: "-" in the tables, null in the JSON). A
// calibration.json fitted for another distribution than the head's is refused.
#include "calibration_print.hpp"
#include "calibration_svg.hpp"
#include "command.hpp"
#include "model_loading.hpp"
#include "number_forecasts.hpp"
#include "numeric_options.hpp"
#include "progress.hpp"
#include "scores_print.hpp"
#include "svg_plot.hpp"

#include <causalqwen/core/threading.hpp>
#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/eval/number_scores.hpp>
#include <causalqwen/eval/risk_coverage.hpp>
#include <causalqwen/format/atomic_file.hpp>
#include <causalqwen/train/evaluate.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

namespace {

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace ce = causalqwen::eval;
namespace fs = std::filesystem;

struct EvalOptions {
  cqcli::ModelOptions model;
  cqcli::WeightsOption weights;
  std::string data, out, plot, baseline_data, dtype = "f32", predictions;
  std::optional<double> baseline;
  double selective_level = 0.9;
  std::size_t batch = 16, seq = 128, threads = 2;
  bool plain = false, no_calibration = false;
};

/// The baseline prediction: --baseline, or the median of the numbers of --baseline-data.
std::optional<double> baseline_value(const EvalOptions& o, const cq::text::Tokenizer& tok) {
  if (o.baseline) return o.baseline;
  if (o.baseline_data.empty()) return std::nullopt;
  const auto texts = ct::read_jsonl_texts(o.baseline_data);
  const auto median = ce::median(ct::encode_corpus(tok, texts).numbers());
  if (!median)
    throw cq::FormatError(fmt::format("{}: no line holds a number, so it gives no median for --baseline-data", o.baseline_data));
  return median;
}

nlohmann::json metrics_json(const cq::model::HeadMetrics& m) {
  return {{"L_cls_mean", m.L_cls_mean}, {"L_reg_eff", m.L_reg_eff}, {"L_total", m.L_total},
          {"accuracy", m.accuracy},     {"num_accuracy", m.num_accuracy}, {"reg_mae", m.reg_mae},
          {"ovr_prob_sum", m.ovr_prob_sum}, {"mean_P_num", m.mean_P_num},
          {"units_mean_loc", m.units_mean_loc}, {"units_mean_scale", m.units_mean_scale}};
}

template <class T>
void run_eval(const EvalOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto tok_path = o.model.tokenizer_path();
  if (!tok_path)
    throw cq::FormatError(fmt::format("{}: no tokenizer.json in the model directory; give --tokenizer FILE", o.model.model_dir));
  const auto tok = cq::text::Tokenizer::from_file(tok_path->string());
  auto loaded = o.model.load<T>();
  o.weights.apply(*loaded.model);
  auto& model = *loaded.model;
  cqcli::require_matching(tok, *tok_path, model.config(), o.model.model_dir);
  if (loaded.max_position_embeddings && o.seq > *loaded.max_position_embeddings)
    throw cq::FormatError(fmt::format("--seq-len {} must be at most the model's max_position_embeddings {} ({})",
                                      o.seq, *loaded.max_position_embeddings, cqcli::position_cap_source(loaded)));

  const auto records = ct::read_jsonl_records(o.data, "text", "group");
  const auto corpus = ct::encode_corpus(tok, records.texts);
  const auto numbers = corpus.numbers().size();
  if (numbers == 0)
    throw cq::FormatError(fmt::format("{}: none of its {} lines holds a number: eval scores the predictions of numbers",
                                      o.data, records.texts.size()));
  std::size_t cut = 0, cut_numbers = 0;
  for (std::size_t k = 0; k < corpus.size(); ++k) {
    if (corpus.length(k) <= o.seq + 1) continue;  // S inputs predict S labels: S + 1 tokens fit
    ++cut;
    for (auto id : corpus.ids_of(k).subspan(o.seq + 1)) cut_numbers += id == corpus.num_id;
  }
  const auto batches = ct::evaluation_batches<T>(corpus, o.batch, o.seq, ct::BatchLayout::padded);
  fmt::print("eval: {} texts from {} ({} groups), {} numbers, in {} batches of up to {} texts x {} tokens ({})\n",
             records.texts.size(), o.data, records.groups.empty() ? std::size_t(0) : std::set(records.groups.begin(), records.groups.end()).size(),
             numbers, batches.size(), o.batch, o.seq, o.dtype);
  if (cut > 0)
    fmt::print("  {} texts are longer than --seq-len {} tokens and are cut there ({} of their numbers are not scored)\n",
               cut, o.seq, cut_numbers);

  ct::EvaluationOptions options;
  options.baseline_value = baseline_value(o, tok);
  if (!records.groups.empty()) options.group_of = ct::group_by_sequence(records.groups);
  cqcli::Progress progress(batches.size(), 0, stdout, o.plain ? cqcli::Progress::Style::lines : cqcli::Progress::Style::automatic);
  progress.set_label("batch");
  const auto start = std::chrono::steady_clock::now();  // the model is loaded and the data tokenized
  std::size_t slots = 0;  // positions run so far, padding included
  options.on_batch = [&](std::size_t done, std::size_t) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slots += batches[done - 1].batch * batches[done - 1].seq;
    progress.show(done, fmt::format("{:.0f} positions/s", double(slots) / std::max(seconds, 1e-9)));
  };
  const auto family = cqcli::forecast_family(model.config());
  const bool has_intervals = family != cq::eval::ForecastFamily::point;
  const auto calibration =
      o.no_calibration || !has_intervals ? std::nullopt : cq::eval::load_interval_calibration(o.model.model_dir);
  if (calibration) cqcli::require_calibration_family(*calibration, model.config(), o.model.model_dir);
  cqcli::NumberForecasts forecasts;
  const auto e = ct::evaluate(model, batches, forecasts.collector(o.batch, records.groups), options);
  progress.finish();
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start).count(),
               preparing = std::chrono::duration<double>(start - t0).count();

  const auto& m = e.metrics;
  fmt::print("\nregression head: {} (config.json reg_head){}\n", cq::model::reg_head_name(model.config().reg_head),
             has_intervals ? "" : ": point forecasts, scored by their errors (no NLL, interval or PIT)");
  fmt::print("loss terms (mean over batches, as in training): L_total {:.4f} = L_cls {:.4f} + L_reg {:.4f}\n",
             m.L_total, m.L_cls_mean, m.L_reg_eff);
  if (e.non_finite > 0)
    fmt::print("WARNING: {} predictions are not finite (a diverged model?) and are left out of the statistics below\n",
               e.non_finite);
  fmt::print("overall:\n");
  cqcli::print_token_calibration(stdout, e.calibration.overall.tokens);
  cqcli::print_number_calibration(stdout, e.calibration.overall.numbers);
  if (!e.calibration.groups.empty()) {
    fmt::print("by group:\n  {:<20} {:>8} {:>10} {:>10} {:>10} {:>10}  {}\n", "group", "numbers", "accuracy", "MAE",
               "NLL", "cover 90%", "verdict at 90%");
    for (const auto& [name, s] : e.calibration.groups) {
      const auto* at90 = cqcli::interval_at(s.numbers, 0.9);
      fmt::print("  {:<20} {:>8} {:>10} {:>10} {:>10} {:>10}  {}\n", name, s.numbers.numbers,
                 cqcli::or_dash(s.tokens.accuracy, "{:.4f}"), cqcli::or_dash(s.numbers.mae),
                 cqcli::or_dash(s.numbers.mean_nll), cqcli::or_dash(at90 ? at90->coverage : std::nullopt, "{:.3f}"),
                 at90 && at90->verdict ? cq::eval::verdict_name(*at90->verdict) : "-");
    }
  }
  // proper scores, before and after the recalibration of the intervals
  const std::vector<double> levels(ce::coverage_levels.begin(), ce::coverage_levels.end());
  std::vector<double> calibrated_levels;
  if (calibration)
    for (double p : levels)
      if (calibration->has_level(p)) calibrated_levels.push_back(p);
  std::vector<double> ys;
  for (const auto& f : forecasts.forecasts) ys.push_back(f.y);
  const auto skill_baseline = options.baseline_value ? options.baseline_value : cq::eval::median_of(ys);
  const std::string baseline_source = o.baseline ? "--baseline"
                                      : !o.baseline_data.empty() ? "the median of --baseline-data's numbers"
                                                                 : "the median of the scored numbers";
  const auto scores = cq::eval::score_grouped(forecasts.forecasts, forecasts.group, family, levels, skill_baseline);
  std::optional<cq::eval::GroupedProperScores> calibrated_scores;
  if (calibration && !calibrated_levels.empty())
    calibrated_scores = cq::eval::score_grouped(forecasts.forecasts, forecasts.group, family, calibrated_levels, skill_baseline,
                                                &*calibration);
  cqcli::print_proper_scores(stdout, scores, skill_baseline, baseline_source);
  if (calibration) {
    const auto file = (fs::path(o.model.model_dir) / cq::eval::calibration_file_name).string();
    if (calibrated_scores) cqcli::print_recalibration(stdout, scores, *calibrated_scores, *calibration, file);
    else fmt::print("recalibration: {} has no multiplier at the levels eval reports ({})\n", file, fmt::join(levels, ", "));
  }
  const auto risk = has_intervals ? cq::eval::risk_coverage_curve(
                                        forecasts.forecasts, o.selective_level, family,
                                        calibration && calibration->has_level(o.selective_level) ? &*calibration : nullptr,
                                        forecasts.group)
                                  : std::vector<cq::eval::RiskCoveragePoint>{};
  if (!o.predictions.empty()) {
    std::string lines;
    for (std::size_t i = 0; i < forecasts.forecasts.size(); ++i) {
      const auto& f = forecasts.forecasts[i];
      const std::size_t line = forecasts.sequence[i];
      nlohmann::json j = {{"line", line}, {"text", records.texts[line]}, {"y", f.y}, {"loc", f.loc}, {"scale", f.scale},
                          {"p_num", forecasts.p_num[i]},
                          {"group", forecasts.group.empty() ? nlohmann::json(nullptr) : nlohmann::json(forecasts.group[i])}};
      lines += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    cq::format::write_file_atomically(o.predictions, [&](cq::format::AtomicFile& f) { f.write(lines); });
    fmt::print("predictions ({} numbers) -> {}\n", forecasts.forecasts.size(), o.predictions);
  }
  fmt::print("evaluated {} batches in {:.1f} s ({:.0f} positions/s, padding included), after {:.1f} s loading the model "
             "and the data{}\n",
             e.batches, seconds, double(slots) / std::max(seconds, 1e-9), preparing,
             o.weights.weights == "f32" ? "" : fmt::format("; weights rounded to {}", o.weights.weights));

  if (!o.out.empty()) {
    nlohmann::json j = {{"model", o.model.model_dir}, {"tokenizer", tok_path->string()}, {"data", o.data},
                        {"dtype", o.dtype},           {"weights", o.weights.weights}, {"texts", records.texts.size()}, {"texts_cut", cut},
                        {"numbers_not_scored", cut_numbers}, {"seq_len", o.seq}, {"batch_size", o.batch},
                        {"batches", e.batches},       {"non_finite", e.non_finite}, {"metrics", metrics_json(m)},
                        {"reg_head", std::string(cq::model::reg_head_name(model.config().reg_head))},
                        {"calibration", ce::calibration_to_json(e.calibration)}};
    j["scores"] = {{"baseline", {{"value", skill_baseline ? nlohmann::json(*skill_baseline) : nlohmann::json(nullptr)},
                                 {"source", baseline_source}}},
                   {"trimmed_fraction", cq::eval::trimmed_fraction},
                   {"pinball_levels", cq::eval::pinball_levels},
                   {"uncalibrated", cq::eval::grouped_scores_to_json(scores)},
                   {"calibrated", calibrated_scores ? cq::eval::grouped_scores_to_json(*calibrated_scores) : nlohmann::json(nullptr)},
                   {"interval_calibration", calibration ? cq::eval::interval_calibration_to_json(*calibration) : nlohmann::json(nullptr)}};
    j["risk_coverage"] = has_intervals ? nlohmann::json{{"level", o.selective_level},
                                                        {"calibrated", calibration && calibration->has_level(o.selective_level)},
                                                        {"curve", cq::eval::risk_coverage_to_json(risk)}}
                                       : nlohmann::json(nullptr);
    cq::format::write_file_atomically(o.out, [&](cq::format::AtomicFile& f) { f.write(j.dump(2) + "\n"); });
    fmt::print("report -> {}\n", o.out);
  }
  if (!o.plot.empty()) {
    std::ostringstream svg;
    cqcli::write_calibration_svg(e.calibration, svg);
    cq::format::write_file_atomically(o.plot, [&](cq::format::AtomicFile& f) { f.write(svg.str()); });
    fmt::print("calibration picture -> {}\n", o.plot);
    if (has_intervals) {
      const auto risk_plot = cqcli::risk_coverage_plot_path(o.plot);
      cqcli::write_risk_coverage_svg(risk_plot, risk, o.selective_level);
      fmt::print("risk-coverage picture -> {}\n", risk_plot.string());
    }
  }
}

const cqcli::Registration reg_eval{"eval", [](CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* sub = app.add_subcommand("eval", "Score a checkpoint on a JSONL file: losses, next-token accuracy and the "
                                         "calibration of its Cauchy uncertainty, overall and per group");
  o->model.add_to(sub);
  o->weights.add_to(sub);
  sub->add_option("--data", o->data, "JSONL, one {\"text\": ..., \"group\": ...} per line (group optional)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", o->out, "write the report as JSON here");
  sub->add_option("--plot", o->plot, "draw the calibration picture (coverage, PIT histogram) as SVG here");
  auto* fixed = cqcli::add_real(sub, "--baseline", o->baseline, cqcli::RealRange::any(), "a constant prediction of every number to compare with");
  sub->add_option("--baseline-data", o->baseline_data, "JSONL whose numbers' median is the baseline (e.g. the training data)")
      ->check(CLI::ExistingFile)
      ->excludes(fixed);
  cqcli::add_integer(sub, "--batch-size", o->batch, {1, std::int64_t{1} << 16}, "texts per batch");
  cqcli::add_integer(sub, "--seq-len", o->seq, {1, std::int64_t{1} << 20}, "tokens per text (longer texts are cut)");
  sub->add_option("--dtype", o->dtype, "compute type: f32 or f64")->capture_default_str()->check(CLI::IsMember({"f32", "f64"}));
  cqcli::add_integer(sub, "--threads", o->threads, {1, cqcli::max_threads}, "threads");
  sub->add_flag("--plain", o->plain, "plain progress lines instead of a bar");
  sub->add_option("--predictions", o->predictions,
                  "write one JSON line per scored number here: line, text, y, loc, scale, p_num, group");
  sub->add_flag("--no-calibration", o->no_calibration, "score the model's own intervals only, even when DIR/calibration.json exists");
  cqcli::add_real(sub, "--selective-level", o->selective_level, cqcli::RealRange::open(0.0, 1.0),
                  "the interval level whose widths order the risk-coverage curve");
  sub->callback([o] {
    cq::set_threads(o->threads);
    if (o->dtype == "f64") return run_eval<double>(*o);
    run_eval<float>(*o);
  });
}};

}  // namespace
