// causalqwen report --model DIR --inputs FILE.json
// causalqwen report --model DIR --text "..." [--tokenizer FILE]
//
// --text builds the batch from a sentence: its ids with every number as <NUM> and its value,
// <|endoftext|> at the end, and the next-token labels (one sequence, teacher-forced).
// The debug report of one forward pass: each stage's shapes and statistics,
// the losses and their parts, P(<NUM>) and the gate at every <NUM> target with the gate's
// effect on the regression signal, the metrics, and warnings for known pathologies.
#include "command.hpp"
#include "model_loading.hpp"
#include "numeric_options.hpp"

#include <causalqwen/train/batch_json.hpp>
#include <causalqwen/train/corpus_batch_source.hpp>
#include <causalqwen/train/token_corpus.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

namespace {

namespace cq = causalqwen;

struct Stats {
  double min = INFINITY, max = -INFINITY, mean = 0, std = 0;
};
template <class V>
Stats stats_of(const V& v) {
  Stats s;
  double sum = 0, sq = 0;
  for (auto x : v) {
    const double d = static_cast<double>(x);
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
    sum += d;
    sq += d * d;
  }
  const double n = static_cast<double>(v.size());
  s.mean = n ? sum / n : 0;
  s.std = n ? std::sqrt(std::max(0.0, sq / n - s.mean * s.mean)) : 0;
  return s;
}

template <class V>
void stage(const char* name, const char* shape, const V& v, const char* note = "") {
  const auto s = stats_of(v);
  fmt::print("  {:<9} {:<12} min {:>11.4g}  mean {:>11.4g}  max {:>11.4g}  std {:>10.4g}  {}\n", name, shape, s.min,
             s.mean, s.max, s.std, note);
}

/// The batch of one sentence: its ids (numbers as <NUM> with their values, <|endoftext|> at the
/// end) as inputs, and the next ids as labels.
cq::train::BatchData<double> batch_of_text(const cqcli::ModelOptions& mo, const std::string& text,
                                        const cq::model::CausalConfig& cfg, std::size_t max_positions) {
  if (text.empty()) throw cq::DomainError("report: --text is empty: give a sentence to diagnose");
  const auto tok_path = mo.tokenizer_path();
  if (!tok_path) throw cq::FormatError("report --text needs a tokenizer: --tokenizer FILE or DIR/tokenizer.json");
  const auto tok = cq::text::Tokenizer::from_file(tok_path->string());
  cqcli::require_matching(tok, *tok_path, cfg, mo.model_dir);
  const std::vector<std::string> texts{text};
  const auto corpus = cq::train::encode_corpus(tok, texts);
  if (corpus.length(0) < 2) throw cq::DomainError("report: --text gives fewer than 2 tokens: nothing to predict");
  if (corpus.length(0) - 1 > max_positions)
    throw cq::DomainError(fmt::format("report: --text gives {} positions, more than the model's max_position_embeddings {}",
                                      corpus.length(0) - 1, max_positions));
  std::string shown;
  for (auto id : corpus.ids_of(0)) shown += id == corpus.num_id ? " <NUM>" : fmt::format(" {}", id);
  fmt::print("text: {} tokens, {} numbers:{}\n", corpus.length(0), corpus.numbers().size(), shown);
  return cq::train::evaluation_batches<double>(corpus, 1, corpus.length(0) - 1)[0];
}

void run_report(const cqcli::ModelOptions& mo, const std::string& inputs, const std::optional<std::string>& text,
                std::optional<double> threshold) {
  auto loaded = mo.load<double>();
  auto& model = *loaded.model;
  if (threshold) {  // what-if: every class's OvR threshold set to one value
    for (auto& c : model.params().slot_span(cq::model::names::threshold)) c = *threshold;
    model.params().touch();
  }
  const auto& cfg = model.config();
  const std::size_t max_positions = loaded.max_position_embeddings.value_or(cq::format::default_max_position_embeddings);
  const auto data = text ? batch_of_text(mo, *text, cfg, max_positions) : cq::train::read_batch_json<double>(inputs, cfg.causal_size);
  if (!text)
    for (std::size_t i = 0; i < data.position_ids.size(); ++i)
      if (static_cast<std::size_t>(data.position_ids[i]) >= max_positions)
        throw cq::FormatError(fmt::format("{}: field 'position_ids' [{}][{}] = {} must be below the model's "
                                          "max_position_embeddings {} ({})", inputs, i / data.seq, i % data.seq,
                                          data.position_ids[i], max_positions, cqcli::position_cap_source(loaded)));
  const std::size_t B = data.batch, S = data.seq, M = B * S, H = cfg.hidden_size(), K = cfg.num_classes;
  typename cq::model::CausalQwen<double>::Cache cache;
  const auto m = model.evaluate(data.view(), cache);
  const auto hp = model.evaluation_head_params();
  const auto& h = cache.head;
  const auto full = model.head().full_vocabulary(hp, h);

  fmt::print("CausalQwen forward report — {} ({})\n", mo.model_dir, loaded.converted ? "converted from a base Qwen2 checkpoint" : "CausalQwen checkpoint");
  fmt::print("model: H = C = {}, {} layers, {} heads / {} KV heads, K = {} OvR classes, <NUM> = {}\n", H,
             cfg.backbone.num_layers, cfg.backbone.num_heads, cfg.backbone.num_kv_heads, K, cfg.num_token_id);
  const auto thr = stats_of(hp.action.threshold);
  fmt::print("settings: thresholds C in [{:.4g}, {:.4g}], alpha = {}, lambda = {}, |b_noise| mean {:.4g}\n\n", thr.min,
             thr.max, cfg.alpha_gate, cfg.reg_loss_weight, [&] {
               double sum = 0;
               for (auto b : hp.action.b_noise) sum += std::fabs(b);
               return sum / static_cast<double>(hp.action.b_noise.size());
             }());

  fmt::print("1. batch: B = {}, S = {}; {} tokens, {} positions with a label, {} <NUM> targets\n\n", B, S,
             std::count(data.attention_mask.begin(), data.attention_mask.end(), 1), m.valid_count, m.num_count);
  fmt::print("2. stages (statistics over all B·S positions)\n");
  const std::string sh = fmt::format("[{},{},{}]", B, S, H), sk = fmt::format("[{},{},{}]", B, S, K), s2 = fmt::format("[{},{}]", B, S);
  stage("e", sh.c_str(), std::span<const double>(cache.e.data(), M * H), "numeric-aware embedding");
  stage("z", sh.c_str(), std::span<const double>(cache.backbone.z.data, M * H), "backbone output");
  stage("loc_U", sh.c_str(), h.abduction.loc_U, "abduction: individual location");
  stage("scale_U", sh.c_str(), h.abduction.scale_U, "abduction: individual scale");
  stage("loc_S", sk.c_str(), full.loc_S, "OvR decision locations");
  stage("scale_S", sk.c_str(), full.scale_S, "OvR decision scales");
  stage("ovr_z", sk.c_str(), full.ovr_z, "(loc_S - C)/scale_S");
  stage("P", sk.c_str(), full.P, "P(S_k > C_k)");
  stage("loc_Y", s2.c_str(), h.regression.loc_Y, "regression location");
  stage("scale_Y", s2.c_str(), h.regression.scale_Y, "regression scale");

  fmt::print("\n3. losses\n");
  fmt::print("  L_cls_mean = {:.6g}   (sum over K classes per position, mean over {} labelled positions)\n", m.L_cls_mean, m.valid_count);
  fmt::print("  L_reg_eff  = {:.6g}   (sum of gate*nll over <NUM> targets / {}; nll: the {} head's loss, config.json reg_head)\n",
             m.L_reg_eff, std::max<std::size_t>(m.num_count, 1),
             cq::model::reg_head_name(cfg.reg_head));
  fmt::print("  L_total    = L_cls_mean + {}*L_reg_eff = {:.6g}   (regression share {:.2f}%)\n", cfg.reg_loss_weight, m.L_total,
             m.L_total != 0 ? 100.0 * cfg.reg_loss_weight * m.L_reg_eff / m.L_total : 0.0);

  fmt::print("\n4. the gate at every <NUM> target: gate = alpha + (1 - alpha)*P(<NUM>) scales the regression gradient\n");
  fmt::print("  {:>4} {:>4} {:>12} {:>11} {:>10} {:>10} {:>10} {:>9} {:>11} {:>11}\n", "b", "s", "y", "loc_Y", "scale_Y",
             "|y-loc_Y|", "P(<NUM>)", "gate", "nll", "gate*nll");
  double p_sum = 0;
  for (std::size_t i = 0; i < M; ++i) {
    if (!h.num[i]) continue;
    p_sum += h.regression.P_num[i];
    fmt::print("  {:>4} {:>4} {:>12.5g} {:>11.5g} {:>10.4g} {:>10.4g} {:>10.3e} {:>9.3e} {:>11.5g} {:>11.5g}\n", i / S, i % S,
               data.target_values[i], h.regression.loc_Y[i], h.regression.scale_Y[i], std::fabs(data.target_values[i] - h.regression.loc_Y[i]), h.regression.P_num[i],
               h.regression.gate[i], h.regression.nll[i], h.regression.L_reg_gated[i]);
  }
  if (m.num_count)
    fmt::print("  the regression head receives {:.3g}% of the gradient it would get without the gate\n",
               100.0 * (cfg.alpha_gate + (1 - cfg.alpha_gate) * p_sum / static_cast<double>(m.num_count)));

  fmt::print("\n5. metrics\n");
  fmt::print("  reg_mae {:.6g}   units_mean_loc {:.6g}   units_mean_scale {:.6g}   ovr_prob_sum {:.6g}\n", m.reg_mae,
             m.units_mean_loc, m.units_mean_scale, m.ovr_prob_sum);
  fmt::print("  accuracy {:.4f} ({} labelled)   num_accuracy {:.4f} ({} <NUM>)   mean P(<NUM>) at <NUM> targets {:.4g}\n",
             m.accuracy, m.valid_count, m.num_accuracy, m.num_count, m.mean_P_num);

  fmt::print("\n6. diagnosis\n");
  int warnings = 0;
  auto warn = [&](const std::string& text) {
    fmt::print("  WARNING: {}\n", text);
    ++warnings;
  };
  if (m.num_count && m.mean_P_num < 0.01) {
    const double passed = cfg.alpha_gate + (1 - cfg.alpha_gate) * m.mean_P_num;
    warn(fmt::format("P(<NUM>) at <NUM> targets averages {:.3g}, so the gate passes only {:.2g}% of the regression "
                     "gradient{}: {}(the gate is closed). The threshold C = {:.4g} lies far above loc_S (max {:.4g}); "
                     "lower ovr_threshold{}.",
                     m.mean_P_num, 100 * passed, cfg.alpha_gate > 0 ? fmt::format(" (alpha = {} sets the floor)", cfg.alpha_gate) : "",
                     cfg.alpha_gate < 0.05 ? "the regression head barely learns " : "", thr.max, stats_of(full.loc_S).max,
                     cfg.alpha_gate < 0.05 ? " or raise alpha_gate" : ""));
  }
  if (m.valid_count && m.ovr_prob_sum < 0.05)
    warn(fmt::format("sum_k P_k averages {:.3g}: every class is judged unlikely, including the right one.", m.ovr_prob_sum));
  if (m.valid_count && m.ovr_prob_sum > 0.5 * static_cast<double>(K))
    warn(fmt::format("sum_k P_k averages {:.3g} of K = {}: the thresholds are below most decision scores.", m.ovr_prob_sum, K));
  const auto su = stats_of(h.abduction.scale_U), lu = stats_of(h.abduction.loc_U);
  if (su.mean > 100 * std::max(1.0, std::fabs(lu.mean) + lu.std))
    warn(fmt::format("scale_U (mean {:.3g}) dwarfs loc_U (mean {:.3g}, std {:.3g}): every decision is dominated by noise.",
                     su.mean, lu.mean, lu.std));
  if (!warnings) fmt::print("  no known pathology found\n");
}

const cqcli::Registration reg_report{"report", [](CLI::App& app) {
  auto* sub = app.add_subcommand("report", "Print the debug report of one forward pass (stages, losses, gate, metrics)");
  auto mo = std::make_shared<cqcli::ModelOptions>();
  auto inputs = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto threshold = std::make_shared<std::optional<double>>();
  mo->add_to(sub);
  auto* in = sub->add_option("--inputs", *inputs, "batch JSON")->check(CLI::ExistingFile);
  auto* tx = sub->add_option("--text", *text, "a sentence to diagnose instead (needs the model's tokenizer)")->excludes(in);
  cqcli::add_real(sub, "--threshold", *threshold, cqcli::RealRange::any(), "what-if: set every class's OvR threshold to this value");
  sub->callback([mo, inputs, text, threshold, in, tx] {
    if (in->count() + tx->count() != 1) throw cq::DomainError("report: give exactly one of --inputs FILE.json, --text \"...\"");
    run_report(*mo, *inputs, tx->count() ? std::optional<std::string>(*text) : std::nullopt, *threshold);
  });
}};

}  // namespace
