// The text layer of generation (generate/render.hpp, generate/text_generation.hpp) on a tiny
// byte-level tokenizer (data/tiny_tokenizer.json: " abcdefghijklmnopqrs" are ids 0…19, <NUM> is
// 20) and a random model of the same layout (vocab 23, K = 21 classes): numbers rendered plain,
// as "v (±γ)" or as a central interval; stop strings end a row once its text contains one and
// cut the text right after it; streamed deltas concatenate to the final text.
#include "../support/test_support.hpp"

#include <causalqwen/generate.hpp>

#include <map>
#include <utility>
#include <string>
#include <vector>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;

namespace {

constexpr std::int64_t num_id = 20;

cq::text::Tokenizer tiny_tokenizer() {
  cq::text::TokenizerOptions o;
  o.num_token_id = static_cast<cq::text::TokenId>(num_id);
  return cq::text::Tokenizer::from_file(CQ_TINY_TOKENIZER, o);
}

/// vocab 23, K = 21 classes, <NUM> = 20, H 16; <NUM> is chosen now and then.
std::unique_ptr<cqm::CausalQwen<double>> tiny_model(std::uint64_t seed) {
  cqm::CausalConfig c;
  c.backbone = {23, 16, 24, 2, 4, 2, 1e-6, 1e4};
  c.causal_size = 16;
  c.num_classes = 21;
  c.num_token_id = num_id;
  c.ovr_threshold = {0.5};
  c.gamma_init = 1.0;
  auto m = std::make_unique<cqm::CausalQwen<double>>(c);
  m->init_random(seed, 0.3);
  auto& p = m->params();
  std::mt19937_64 rng(seed + 7);
  std::normal_distribution<double> n(0.0, 1.0);
  for (auto& w : p.slot_span(cqm::names::reg_w)) w = 3 * n(rng);
  for (auto& w : p.slot_span(cqm::names::cls_w)) w = n(rng);
  p.slot_span(cqm::names::cls_b)[num_id] = 1.0;
  p.touch();
  return m;
}

cqg::GeneratedToken token(std::int64_t id, double value = 0, double scale = 0) {
  cqg::GeneratedToken t;
  t.id = id;
  t.value = value;
  t.scale = scale;
  return t;
}

/// The text a row should have under stop strings, from its free-running tokens: the first
/// prefix whose rendering contains a stop string, cut right after the earliest one.
struct Expected {
  std::size_t tokens;
  std::string text;
  bool stopped;
};
Expected expected_with_stops(const cq::text::Tokenizer& tok, const std::vector<cqg::GeneratedToken>& free_run,
                             const std::vector<std::string>& stops, const cqg::RenderOptions& r) {
  for (std::size_t n = 1; n <= free_run.size(); ++n) {
    const std::vector<cqg::GeneratedToken> prefix(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string text = cqg::render_tokens(tok, prefix, r);
    std::size_t cut = std::string::npos;
    for (const auto& s : stops)
      if (const auto at = text.find(s); at != std::string::npos) cut = std::min(cut, at + s.size());
    if (cut != std::string::npos) return {n, text.substr(0, cut), true};
  }
  return {free_run.size(), cqg::render_tokens(tok, free_run, r), false};
}

}  // namespace

TEST_CASE("generated numbers are written plain, as value (±scale), or as a central interval") {
  const auto tok = tiny_tokenizer();
  // "ab", 42.3 (scale 1.2), " ", 10 (scale 2), "c"; non-<NUM> tokens carry numbers that must not show
  const std::vector<cqg::GeneratedToken> tokens = {token(1, 7, 7), token(2),       token(num_id, 42.3, 1.2),
                                                   token(0, 5, 5), token(num_id, 10, 2), token(3, 9, 1)};
  cqg::RenderOptions r;
  CHECK(cqg::render_tokens(tok, tokens, r) == "ab42.3 10c");
  r.uncertainty = cqg::Uncertainty::plus_minus;
  CHECK(cqg::render_tokens(tok, tokens, r) == "ab42.3 (\xC2\xB1" "1.2) 10 (\xC2\xB1" "2)c");
  r.uncertainty = cqg::Uncertainty::interval;
  r.coverage = 0.5;  // the quartiles: loc ± γ
  CHECK(cqg::render_tokens(tok, {token(num_id, 10, 2)}, r) == "10 [8, 12]");
  r.coverage = 0.9;  // loc ± γ·tan(0.45π) = 10 ± 12.6275…, two significant digits
  CHECK(cqg::render_tokens(tok, tokens, r) == "ab42.3 [35, 50] 10 [-2.6, 23]c");
  r.scale_format = {4};
  CHECK(cqg::render_tokens(tok, {token(num_id, 10, 2)}, r) == "10 [-2.628, 22.63]");
  r.value_format = {2};
  r.uncertainty = cqg::Uncertainty::plus_minus;
  CHECK(cqg::render_tokens(tok, {token(num_id, 1234.5, 0.25), token(4)}, r) == "1200 (\xC2\xB1" "0.25)d");
}

TEST_CASE("a recalibrated interval (interval_of) is the one written; a number wider than the width limit is \"unknown\"") {
  const auto tok = tiny_tokenizer();
  const std::vector<cqg::GeneratedToken> tokens = {token(1), token(num_id, 10, 2), token(0), token(num_id, 50, 0.1), token(3)};
  cqg::RenderOptions r;
  r.uncertainty = cqg::Uncertainty::interval;
  r.coverage = 0.5;
  r.interval_of = [](double loc, double scale) { return std::pair{loc - 3 * scale, loc + 3 * scale}; };
  CHECK(cqg::render_tokens(tok, tokens, r) == "a10 [4, 16] 50 [50, 50]c");
  // width limit at the same interval: 12 > 5 is unknown, 0.6 is kept
  r.max_width = 5;
  CHECK(r.too_wide(10, 2));
  CHECK_FALSE(r.too_wide(50, 0.1));
  CHECK(cqg::render_tokens(tok, tokens, r) == "aunknown 50 [50, 50]c");
  // plain numbers with a relative limit: width 2·γ (coverage 0.5, no interval_of) against 0.1·|value|
  r = {};
  r.coverage = 0.5;
  r.max_relative_width = 0.1;
  CHECK(cqg::render_tokens(tok, tokens, r) == "aunknown 50c");
  r.uncertainty = cqg::Uncertainty::plus_minus;
  CHECK(cqg::render_tokens(tok, tokens, r) == "aunknown 50 (\xC2\xB1" "0.1)c");
  r.max_relative_width.reset();
  r.uncertainty = cqg::Uncertainty::none;
  CHECK(cqg::render_tokens(tok, tokens, r) == "a10 50c");  // no limit: as before
}

TEST_CASE("stop strings end a row once its text contains one; the text is cut right after it") {
  const auto seed = cqtest::test_seed(81, "text generation stop strings");
  const auto tok = tiny_tokenizer();
  auto model = tiny_model(seed);
  const std::vector<std::string> prompts = {"a big cab 12.5 is", "fish", "ship 3 dogs"};
  for (auto mode : {cqg::GenerationMode::deterministic, cqg::GenerationMode::sampling}) {
    INFO(cqg::mode_name(mode));
    cqg::TextGenerationOptions o;
    o.generation.decode.mode = mode;
    o.generation.max_new_tokens = 24;
    o.render.uncertainty = cqg::Uncertainty::plus_minus;
    o.seed = seed;
    cqg::TextGenerator<double> gen(*model, tok);
    const auto free_run = gen.run(prompts, o);
    // a stop string taken from the middle of row 0's free text, and one that never occurs
    const std::string& t0 = free_run[0].text;
    REQUIRE(t0.size() >= 6);
    const std::vector<std::string> stops = {t0.substr(t0.size() / 2, 2), "qqqqqqqq"};
    MESSAGE("row 0: \"", t0, "\", stop string \"", stops[0], "\"");
    o.stop_strings = stops;
    const auto stopped = gen.run(prompts, o);
    std::size_t rows_stopped = 0;
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      INFO("row ", b);
      const auto e = expected_with_stops(tok, free_run[b].generation.tokens, stops, o.render);
      CHECK(stopped[b].text == e.text);
      REQUIRE(stopped[b].generation.tokens.size() == e.tokens);
      for (std::size_t i = 0; i < e.tokens; ++i)
        CHECK(stopped[b].generation.tokens[i].id == free_run[b].generation.tokens[i].id);
      if (e.stopped) {
        ++rows_stopped;
        CHECK(stopped[b].generation.stop == cqg::StopReason::hook);
        CHECK(stopped[b].text.ends_with(stops[0]));
      } else {
        CHECK(stopped[b].generation.stop == free_run[b].generation.stop);
      }
    }
    CHECK(stopped[0].generation.stop == cqg::StopReason::hook);
    CHECK(stopped[0].text.size() < t0.size());
    MESSAGE(rows_stopped, " of ", prompts.size(), " rows stopped");
  }
}

TEST_CASE("streamed deltas concatenate to the final text, with numbers and stop strings") {
  const auto seed = cqtest::test_seed(82, "text generation streaming");
  const auto tok = tiny_tokenizer();
  auto model = tiny_model(seed);
  const std::vector<std::string> prompts = {"a big cab 12.5 is", "fish", "ship 3 dogs", "r"};
  std::size_t numbers = 0;
  for (auto mode : {cqg::GenerationMode::deterministic, cqg::GenerationMode::causal}) {
    for (auto uncertainty : {cqg::Uncertainty::none, cqg::Uncertainty::plus_minus, cqg::Uncertainty::interval}) {
      for (bool with_stop : {false, true}) {
        INFO(cqg::mode_name(mode), " uncertainty ", static_cast<int>(uncertainty), with_stop ? " with stop" : "");
        cqg::TextGenerationOptions o;
        o.generation.decode.mode = mode;
        o.generation.max_new_tokens = 20;
        o.render.uncertainty = uncertainty;
        o.seed = seed;
        if (with_stop) o.stop_strings = {"a", " "};
        cqg::TextGenerator<double> gen(*model, tok);
        const auto plain = gen.run(prompts, o);
        std::map<std::size_t, std::string> streamed;
        std::size_t empty_deltas = 0;
        const auto results = gen.run(prompts, o, [&](std::size_t row, const std::string& delta) {
          empty_deltas += delta.empty();
          streamed[row] += delta;
        });
        CHECK(empty_deltas == 0);
        for (std::size_t b = 0; b < prompts.size(); ++b) {
          INFO("row ", b);
          CHECK(streamed[b] == results[b].text);
          CHECK(results[b].text == plain[b].text);  // streaming changes nothing
          REQUIRE(results[b].generation.tokens.size() == plain[b].generation.tokens.size());
          for (const auto& t : results[b].generation.tokens) numbers += t.id == num_id;
        }
      }
    }
  }
  MESSAGE("<NUM> streamed ", numbers, " times");
  CHECK(numbers > 0);  // numbers were rendered into the streamed text
}

TEST_CASE("mode_statistics: the sampling gap and the causal spread, counted by hand") {
  namespace g = causalqwen::generate;
  using Mode = g::GenerationMode;
  const auto run = [](Mode mode, std::vector<std::int64_t> ids, double value0 = 0) {
    g::ModeRun r;
    r.mode = mode;
    for (std::size_t i = 0; i < ids.size(); ++i) r.result.generation.tokens.push_back({ids[i], i == 0 ? value0 : 0.0});
    return r;
  };
  // deterministic 1 2 3 4; sampling draws differ at steps {2} and {0, 1}, the second is shorter;
  // causal draws: two equal, one other
  const std::vector<g::ModeRun> runs = {run(Mode::deterministic, {1, 2, 3, 4}, 10.0), run(Mode::sampling, {1, 2, 9, 4}, 12.0),
                                        run(Mode::sampling, {7, 8}, 6.0),          run(Mode::causal, {5, 6, 7}),
                                        run(Mode::causal, {5, 6, 7}),               run(Mode::causal, {5, 9}),
                                        run(Mode::compatible, {1, 2, 3, 4})};
  const auto s = g::mode_statistics(runs);
  CHECK(s.sampling_draws == 2);
  CHECK(s.sampling_differ_share == doctest::Approx(3.0 / 6.0));    // 1 of 4 aligned steps, 2 of 2
  CHECK(s.sampling_first_difference == doctest::Approx(1.0));      // steps 2 and 0
  CHECK(s.sampling_step0_differ_share == doctest::Approx(0.5));
  CHECK(s.sampling_step0_value_gap == doctest::Approx(3.0));       // |12 − 10| and |6 − 10|
  CHECK(s.causal_draws == 3);
  CHECK(s.causal_step0_distinct == 1);
  CHECK(s.causal_mean_distinct == doctest::Approx((1.0 + 2.0 + 1.0) / 3.0));
  CHECK(s.causal_distinct_continuations == 2);
  // no sampling and no causal runs: zeros, nothing divided by zero
  const auto alone = g::mode_statistics({run(Mode::deterministic, {1})});
  CHECK(alone.sampling_draws == 0);
  CHECK(alone.sampling_differ_share == 0.0);
  CHECK(alone.causal_distinct_continuations == 0);
}
