// causalqwen eval --model DIR --data FILE.jsonl [--tokenizer FILE] [--out REPORT.json]
//                 [--plot calibration.svg] [--baseline VALUE | --baseline-data TRAIN.jsonl]
//                 [--batch-size B] [--seq-len S] [--dtype f32|f64] [--threads N] [--plain]
//
// Scores a checkpoint on every line of a JSONL file ({"text": "...", "group": "..."}; the group
// is optional), teacher-forced, in batches of whole texts (a text longer than --seq-len tokens is
// cut, and the cut is reported): the loss terms as in training, the next-token statistics, and
// the calibration of the Cauchy predictions of numbers (train::evaluate, train/calibration.hpp),
// overall and per group. --out writes the report as JSON, --plot draws coverage against nominal
// level and the PIT histogram (SVG). Refused with one line naming the file (and line): an empty
// or number-free JSONL, a group that is not a string, a tokenizer whose <NUM> or vocabulary does
// not fit the model.
#include "calibration_print.hpp"
#include "command.hpp"
#include "model_loading.hpp"
#include "numeric_options.hpp"
#include "progress.hpp"

#include <causalqwen/core/threading.hpp>
#include <causalqwen/io/atomic_file.hpp>
#include <causalqwen/train/calibration_svg.hpp>
#include <causalqwen/train/evaluate.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>

#include <fmt/core.h>
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
namespace fs = std::filesystem;

struct EvalOptions {
  cqcli::ModelOptions model;
  cqcli::WeightsOption weights;
  std::string data, out, plot, baseline_data, dtype = "f32";
  std::optional<double> baseline;
  std::size_t batch = 16, seq = 128, threads = 2;
  bool plain = false;
};

/// The baseline prediction: --baseline, or the median of the numbers of --baseline-data.
std::optional<double> baseline_value(const EvalOptions& o, const cq::text::Tokenizer& tok) {
  if (o.baseline) return o.baseline;
  if (o.baseline_data.empty()) return std::nullopt;
  const auto texts = ct::read_jsonl_texts(o.baseline_data);
  const auto median = ct::median(ct::encode_corpus(tok, texts).numbers());
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
  const auto e = ct::evaluate(model, batches, {}, options);
  progress.finish();
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start).count(),
               preparing = std::chrono::duration<double>(start - t0).count();

  const auto& m = e.metrics;
  fmt::print("\nloss terms (mean over batches, as in training): L_total {:.4f} = L_cls {:.4f} + L_reg {:.4f}\n",
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
                 at90 && at90->verdict ? cq::train::verdict_name(*at90->verdict) : "-");
    }
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
                        {"calibration", ct::calibration_to_json(e.calibration)}};
    cq::io::write_file_atomically(o.out, [&](cq::io::AtomicFile& f) { f.write(j.dump(2) + "\n"); });
    fmt::print("report -> {}\n", o.out);
  }
  if (!o.plot.empty()) {
    std::ostringstream svg;
    ct::write_calibration_svg(e.calibration, svg);
    cq::io::write_file_atomically(o.plot, [&](cq::io::AtomicFile& f) { f.write(svg.str()); });
    fmt::print("calibration picture -> {}\n", o.plot);
  }
}

const cqcli::Registration reg{"eval", [](CLI::App& app) {
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
  sub->callback([o] {
    cq::set_threads(o->threads);
    if (o->dtype == "f64") return run_eval<double>(*o);
    run_eval<float>(*o);
  });
}};

}  // namespace
