// causalqwen generate --model DIR [--tokenizer FILE] --prompt TEXT|--prompts FILE.jsonl
//                     --mode deterministic|sampling|causal|compatible [--temperature T] [--top-k K]
//                     [--top-p P] [--max-new-tokens N] [--seed S] [--shared-noise]
//                     [--show-uncertainty] [--interval P] [--stop TEXT]... [--no-cache] [--json]
//                     [--batch-size B] [--padding left|right] [--dtype f32|f64]
//                     [--long-prompt error|keep-end] [--max-width W] [--max-relative-width R]
//                     [--width-level P] [--no-calibration]
//
// Continues each prompt with the checkpoint; generated numbers are written into the text
// (with --show-uncertainty as "42.3 (±1.2)", with --interval P as a central P interval).
// The intervals are the regression head's (config.json reg_head): Cauchy, or Gaussian
// loc ± scale·Φ⁻¹(½ + p/2); --show-uncertainty is refused for a Gaussian head (± the Cauchy scale
// means nothing there) and every uncertainty option for an mse head (a point, no scale).
// One prompt: the continuation streams to the terminal. --json: one object per prompt with
// the generated ids, the text, and each generated <NUM>'s value and scale.
// --temperature: sampling's T (default 1); compatible samples from softmax(loc_S/T) when it is
// given and > 0, and is greedy otherwise.
// --max-new-tokens must lie in [0, 1048576] and be at most the model's max_position_embeddings
// (config.json's, or format::default_max_position_embeddings when it states none). A prompt of P tokens for which P + N − 1 positions (N = --max-new-tokens; the
// last token is never fed back) pass max_position_embeddings is refused (--long-prompt error,
// the default) or loses its first tokens until they fit (keep-end).
#include "command.hpp"
#include "model_loading.hpp"
#include "number_forecasts.hpp"
#include "numeric_options.hpp"

#include <causalqwen/core/json.hpp>
#include <causalqwen/core/line_reader.hpp>
#include <causalqwen/eval/interval_calibration.hpp>
#include <causalqwen/generate.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace cq = causalqwen;
namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;

struct GenerateOptions {
  cqcli::ModelOptions model;
  cqcli::WeightsOption weights;
  std::string prompt, prompts_file, mode = "deterministic", padding = "left", dtype = "f32", long_prompt = "error";
  std::optional<double> temperature;
  std::size_t top_k = 0, batch_size = 8;
  std::int64_t max_new_tokens = 64;  // signed, so that -1 is refused rather than read as 2^64 - 1
  double top_p = 1.0;
  std::optional<double> interval, max_width, max_relative_width, width_level;
  std::uint64_t seed = 0;
  bool shared_noise = false, show_uncertainty = false, no_cache = false, json = false, no_calibration = false;
  std::vector<std::string> stop;
};

/// Prompts from --prompt or a JSONL file (each line a JSON string or {"prompt": "..."}; blank
/// lines skipped; a read error, a line longer than 64 MiB or a file without a prompt refused).
std::vector<std::string> read_prompts(const GenerateOptions& o) {
  if (!o.prompt.empty()) return {o.prompt};
  cq::LineReader in(o.prompts_file);
  std::vector<std::string> out;
  std::string line;
  while (in.next(line)) {
    const std::size_t n = in.line_number();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = cq::json::parse(line, fmt::format("{}:{}", o.prompts_file, n));
    if (j.is_string()) out.push_back(j.get<std::string>());
    else if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) out.push_back(j["prompt"].get<std::string>());
    else throw cq::FormatError(fmt::format("{}:{}: expected a JSON string or an object with \"prompt\"", o.prompts_file, n));
  }
  if (out.empty())
    throw cq::FormatError(fmt::format("{}: the file holds no prompt ({})", o.prompts_file,
                                      in.line_number() == 0 ? std::string("it is empty")
                                                            : fmt::format("{} lines, all blank", in.line_number())));
  return out;
}

const char* stop_name(cqg::StopReason r) {
  switch (r) {
    case cqg::StopReason::eos: return "eos";
    case cqg::StopReason::hook: return "stop_string";
    case cqg::StopReason::length: return "length";
  }
  return "?";
}

template <class T>
void run_generate(const GenerateOptions& o) {
  const auto tok_path = o.model.tokenizer_path();
  if (!tok_path) throw cq::FormatError("generate needs a tokenizer: --tokenizer FILE or DIR/tokenizer.json");
  auto loaded = o.model.load<T>();
  o.weights.apply(*loaded.model);
  // the tokenizer's <NUM> is the checkpoint's (config.json's num_token_id, or for a base model
  // --num-token-id / the first id after the tokenizer's vocabulary), so that a generated <NUM> is
  // rendered as its number whatever id the checkpoint gave it
  cq::text::TokenizerOptions tok_options;
  tok_options.num_token_id = static_cast<cq::text::TokenId>(loaded.model->config().num_token_id);
  const auto tok = cq::text::Tokenizer::from_file(tok_path->string(), tok_options);
  const auto prompts = read_prompts(o);

  cqg::TextGenerationOptions t;
  auto& d = t.generation.decode;
  d.mode = cqg::parse_mode(o.mode);
  d.temperature = o.temperature.value_or(d.mode == cqg::GenerationMode::compatible ? 0.0 : 1.0);
  d.top_k = o.top_k;
  d.top_p = o.top_p;
  d.shared_noise = o.shared_noise;
  d.validate("generate");
  t.generation.max_new_tokens = static_cast<std::size_t>(o.max_new_tokens);
  t.max_sequence_length = cqcli::generation_position_cap(loaded, t.generation.max_new_tokens);
  t.long_prompt = o.long_prompt == "keep-end" ? cqg::LongPrompt::keep_end : cqg::LongPrompt::error;
  t.generation.use_cache = !o.no_cache;
  t.generation.padding = o.padding == "right" ? cq::PaddingSide::right : cq::PaddingSide::left;
  t.stop_strings = o.stop;
  t.seed = o.seed;
  // a Gaussian head's intervals are its own (loc ± scale·Φ⁻¹(½ + p/2)); a point head has none, and
  // ± scale (--show-uncertainty, the Cauchy's 50 % half-width) is the Cauchy head's alone
  const auto& head_config = loaded.model->config();
  const auto family = cqcli::forecast_family(head_config);
  if (o.interval || o.max_width || o.max_relative_width)
    cqcli::require_interval_head(head_config, o.model.model_dir, "--interval, --max-width and --max-relative-width");
  if (o.show_uncertainty && head_config.reg_head != cq::model::RegHead::cauchy)
    throw cq::FormatError(fmt::format("{}/config.json: field 'reg_head' is \"{}\": --show-uncertainty prints ± the Cauchy "
                                      "scale; {}",
                                      o.model.model_dir, cq::model::reg_head_name(head_config.reg_head),
                                      family == cq::eval::ForecastFamily::gaussian
                                          ? "give --interval P for the Gaussian head's own central interval"
                                          : "the model predicts points, with no scale"));
  if (o.interval) {
    t.render.uncertainty = cqg::Uncertainty::interval;
    t.render.coverage = *o.interval;
  } else if (o.show_uncertainty) {
    t.render.uncertainty = cqg::Uncertainty::plus_minus;
  }
  // the recalibrated intervals (calibration.json), and the width limit of selective prediction
  const auto calibration = o.no_calibration ? std::nullopt : cq::eval::load_interval_calibration(o.model.model_dir);
  if (calibration) cqcli::require_calibration_family(*calibration, head_config, o.model.model_dir);
  const double width_level = o.width_level.value_or(o.interval.value_or(0.9));
  const auto calibration_file = (std::filesystem::path(o.model.model_dir) / cq::eval::calibration_file_name).string();
  for (double level : {o.interval.value_or(width_level), width_level})
    if (calibration && (o.interval || o.max_width || o.max_relative_width) && !calibration->has_level(level)) {
      std::string have;
      for (double p : calibration->levels()) have += fmt::format("{}{}", have.empty() ? "" : ", ", p);
      throw cq::FormatError(fmt::format("{}: has multipliers for the levels {} only, not {} (run calibrate with --levels, "
                                        "or give --no-calibration)", calibration_file, have, level));
    }
  if (o.max_width || o.max_relative_width) {
    t.render.max_width = o.max_width;
    t.render.max_relative_width = o.max_relative_width;
    if (!o.interval) t.render.coverage = width_level;
    else if (width_level != *o.interval)
      throw CLI::ValidationError("--width-level", "must equal --interval when both are given (the printed interval is the one judged)");
  }
  if (calibration || family == cq::eval::ForecastFamily::gaussian) {
    const double level = t.render.coverage;
    t.render.interval_of = [&calibration, level, family](double loc, double scale) {
      const auto i = cq::eval::central_interval(loc, scale, level, calibration ? &*calibration : nullptr, nullptr, family);
      return std::pair{i.lower, i.upper};
    };
  }
  cqg::TextGenerator<T> gen(*loaded.model, tok);
  const bool stream = prompts.size() == 1 && !o.json;
  for (std::size_t first = 0; first < prompts.size(); first += o.batch_size) {
    const std::vector<std::string> batch(prompts.begin() + static_cast<std::ptrdiff_t>(first),
                                         prompts.begin() + static_cast<std::ptrdiff_t>(std::min(prompts.size(), first + o.batch_size)));
    t.first_row = first;
    if (stream) fmt::print("{}", batch[0]);
    std::fflush(stdout);
    const auto results = gen.run(batch, t, stream ? cqg::TextStream([](std::size_t, const std::string& s) {
      fmt::print("{}", s);
      std::fflush(stdout);
    }) : cqg::TextStream{});
    for (const auto& r : results) {
      if (stream) {
        fmt::print("\n");
      } else if (o.json) {
        nlohmann::json j;
        j["prompt"] = r.prompt;
        j["prompt_ids"] = r.prompt_ids;
        std::vector<std::int64_t> ids;
        nlohmann::json numbers = nlohmann::json::array();
        for (std::size_t i = 0; i < r.generation.tokens.size(); ++i) {
          const auto& g = r.generation.tokens[i];
          ids.push_back(g.id);
          if (g.id != tok.num_token_id()) continue;
          nlohmann::json number = {{"index", i}, {"value", g.value}, {"scale", g.scale}};
          if (o.interval || t.render.max_width || t.render.max_relative_width) {
            const auto [lower, upper] = t.render.interval(g.value, g.scale);
            number["interval"] = {{"level", t.render.coverage}, {"lower", lower}, {"upper", upper},
                                  {"calibrated", calibration.has_value()}};
          }
          if (t.render.max_width || t.render.max_relative_width) number["unknown"] = t.render.too_wide(g.value, g.scale);
          numbers.push_back(number);
        }
        j["ids"] = ids;
        j["text"] = r.text;
        j["numbers"] = numbers;
        j["p_num"] = [&] {
          std::vector<double> p;
          for (const auto& g : r.generation.tokens) p.push_back(g.p_num);
          return p;
        }();
        j["stop"] = stop_name(r.generation.stop);
        j["mode"] = o.mode;
        fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      } else {
        fmt::print("{}{}\n\n", r.prompt, r.text);
      }
    }
  }
}

const cqcli::Registration reg_generate{"generate", [](CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* sub = app.add_subcommand("generate", "continue prompts in the deterministic, sampling, causal or compatible mode");
  o->model.add_to(sub);
  o->weights.add_to(sub);
  auto* one = sub->add_option("--prompt", o->prompt, "the prompt text");
  auto* many = sub->add_option("--prompts", o->prompts_file, "JSONL file: one JSON string (or {\"prompt\": ...}) per line")
                   ->check(CLI::ExistingFile);
  one->excludes(many);
  sub->add_option("--mode", o->mode, "deterministic | sampling | causal | compatible")
      ->check(CLI::IsMember({"deterministic", "sampling", "causal", "compatible"}));
  cqcli::add_real(sub, "--temperature", o->temperature, cqcli::RealRange::non_negative(),
                  "sampling: T of the location noise (default 1); compatible: softmax temperature (default 0 = greedy)");
  cqcli::add_integer(sub, "--top-k", o->top_k, {0, cqcli::max_token_id + 1}, "compatible sampling: keep the k best classes (0 = all)");
  cqcli::add_real(sub, "--top-p", o->top_p, cqcli::RealRange{0.0, 1.0, true, false}, "compatible sampling: nucleus mass (1 = all)");
  cqcli::add_integer(sub, "--max-new-tokens", o->max_new_tokens, {0, static_cast<std::int64_t>(cqg::max_new_tokens_limit)},
                     "tokens to generate at most");
  sub->add_option("--long-prompt", o->long_prompt,
                  "a prompt that with --max-new-tokens passes max_position_embeddings: error (default) | keep-end (drop its first tokens)")
      ->check(CLI::IsMember({"error", "keep-end"}));
  cqcli::add_integer(sub, "--seed", o->seed, {0, cqcli::max_seed}, "seed of the random streams (prompt i uses stream i)");
  sub->add_flag("--shared-noise", o->shared_noise, "sampling/causal: one noise draw per sequence, kept at every step");
  sub->add_flag("--show-uncertainty", o->show_uncertainty, "write generated numbers as 42.3 (±1.2)");
  cqcli::add_real(sub, "--interval", o->interval, cqcli::RealRange::open(0.0, 1.0),
                  "write generated numbers with their central P interval, e.g. 0.9");
  cqcli::add_real(sub, "--max-width", o->max_width, cqcli::RealRange::positive(),
                  "write a number as \"unknown\" when its central interval (at --width-level) is wider than this");
  cqcli::add_real(sub, "--max-relative-width", o->max_relative_width, cqcli::RealRange::positive(),
                  "write a number as \"unknown\" when its interval is wider than this times |value|");
  cqcli::add_real(sub, "--width-level", o->width_level, cqcli::RealRange::open(0.0, 1.0),
                  "the interval level the width limit judges (default: --interval, else 0.9)");
  sub->add_flag("--no-calibration", o->no_calibration, "print the model's own intervals even when DIR/calibration.json exists");
  sub->add_option("--stop", o->stop, "stop a row once its text contains this string (repeatable)");
  sub->add_flag("--no-cache", o->no_cache, "recompute the whole sequence at every step (no KV cache)");
  sub->add_flag("--json", o->json, "one JSON object per prompt: ids, text, numbers (value, scale), P(<NUM>) per step");
  cqcli::add_integer(sub, "--batch-size", o->batch_size, {1, cqcli::max_batch}, "prompts generated together");
  sub->add_option("--padding", o->padding, "left | right")->check(CLI::IsMember({"left", "right"}));
  sub->add_option("--dtype", o->dtype, "f32 | f64")->check(CLI::IsMember({"f32", "f64"}));
  sub->callback([o, sub] {
    if (o->prompt.empty() && o->prompts_file.empty()) throw CLI::RequiredError("--prompt or --prompts");
    (void)sub;
    if (o->dtype == "f64") run_generate<double>(*o);
    else run_generate<float>(*o);
  });
}};

}  // namespace
