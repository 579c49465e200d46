// The serving layer's request parsing, number reports and chat template (serve/api_request.hpp,
// number_report.hpp, chat_template.hpp): defaults and every field read; each refusal names its
// field; a generated number's offset, text and intervals (loc ± m_p·scale·tan(πp/2), m_p from the
// model's interval calibration, 1 without one); ChatML
// recognised from tokenizer_config.json, anything else refused naming the file.
#include "../support/test_support.hpp"

#include <causalqwen/serve/api_request.hpp>
#include <causalqwen/serve/chat_template.hpp>
#include <causalqwen/serve/number_report.hpp>
#include <causalqwen/serve/token_logprobs.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include <unistd.h>

namespace cq = causalqwen;
namespace cqg = causalqwen::generate;
namespace cqs = causalqwen::serve;

namespace {

cqs::ApiLimits limits() {
  cqs::ApiLimits l;
  l.model_name = "tiny";
  l.max_tokens = 100;
  return l;
}

/// The param of the ApiError that parsing `body` throws ("-" when it does not throw).
std::string refused_param(std::string_view body, bool chat = false) {
  try {
    if (chat) (void)cqs::parse_chat_request(body, limits());
    else (void)cqs::parse_completion_request(body, limits());
  } catch (const cqs::ApiError& e) {
    CHECK(e.status == 400);
    CHECK(std::string(e.what()).size() > 10);
    return e.param;
  }
  return "-";
}

}  // namespace

TEST_CASE("completion requests: defaults, every field, and refusals naming the field") {
  const auto d = cqs::parse_completion_request(R"({"prompt": "a b"})", limits());
  CHECK(d.prompts == std::vector<std::string>{"a b"});
  CHECK(d.d.max_tokens == 16);
  CHECK(d.d.decode.mode == cqg::GenerationMode::deterministic);
  CHECK(d.d.interval_levels == std::vector<double>{0.5, 0.9});
  CHECK(d.d.n == 1);
  CHECK_FALSE(d.d.stream);
  const auto r = cqs::parse_completion_request(
      R"({"model": "tiny", "prompt": ["x", "y"], "max_tokens": 7, "mode": "compatible", "temperature": 0.5, "top_p": 0.8,
          "top_k": -1, "seed": -3, "stop": "q", "n": 2, "stream": true, "logprobs": 0, "echo": true,
          "interval_levels": [0.8], "user": 5, "frequency_penalty": 0})",
      limits());
  CHECK(r.prompts.size() == 2);
  CHECK(r.d.max_tokens == 7);
  CHECK(r.d.decode.mode == cqg::GenerationMode::compatible);
  CHECK(r.d.decode.temperature == 0.5);
  CHECK(r.d.decode.top_p == 0.8);
  CHECK(r.d.decode.top_k == 0);
  CHECK(r.d.seed == static_cast<std::uint64_t>(-3));
  CHECK(r.d.stop == std::vector<std::string>{"q"});
  CHECK(r.d.n == 2);
  CHECK(r.d.stream);
  CHECK(r.d.want_logprobs);
  CHECK(r.d.echo);
  CHECK(r.d.interval_levels == std::vector<double>{0.8});
  // compatible's temperature defaults to 0 (greedy), sampling's to 1, as in `generate`
  CHECK(cqs::parse_completion_request(R"({"prompt": "x", "mode": "compatible"})", limits()).d.decode.temperature == 0);
  CHECK(cqs::parse_completion_request(R"({"prompt": "x", "mode": "sampling"})", limits()).d.decode.temperature == 1);
  CHECK(cqs::parse_completion_request(R"({"prompt": "x", "max_tokens": null})", limits()).d.max_tokens == 16);

  CHECK(refused_param("{") == "");
  CHECK(refused_param("[1]") == "");
  CHECK(refused_param("{}") == "prompt");
  CHECK(refused_param(R"({"prompt": [1]})") == "prompt");
  CHECK(refused_param(R"({"prompt": "x", "model": "other"})") == "model");
  CHECK(refused_param(R"({"prompt": "x", "max_tokens": 0})") == "max_tokens");
  CHECK(refused_param(R"({"prompt": "x", "max_tokens": 101})") == "max_tokens");
  CHECK(refused_param(R"({"prompt": "x", "max_tokens": 18446744073709551615})") == "max_tokens");
  CHECK(refused_param(R"({"prompt": "x", "temperature": -0.1})") == "temperature");
  CHECK(refused_param(R"({"prompt": "x", "top_p": 0})") == "top_p");
  CHECK(refused_param(R"({"prompt": "x", "mode": "greedy"})") == "mode");
  CHECK(refused_param(R"({"prompt": "x", "stop": ["a", ""]})") == "stop");
  CHECK(refused_param(R"({"prompt": "x", "n": 17})") == "n");
  CHECK(refused_param(R"({"prompt": "x", "logprobs": 6})") == "logprobs");
  CHECK(refused_param(R"({"prompt": "x", "interval_levels": [1]})") == "interval_levels");
  CHECK(refused_param(R"({"prompt": "x", "seed": "1"})") == "seed");
}

TEST_CASE("chat requests: messages, content parts, chat's field names") {
  const auto r = cqs::parse_chat_request(
      R"({"messages": [{"role": "developer", "content": "be brief"},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null}],
          "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 0})",
      limits());
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "ab");
  CHECK(r.messages[2].content.empty());
  CHECK(r.d.max_tokens == 5);
  CHECK(r.d.want_logprobs);
  CHECK(cqs::render_chat(cqs::ChatTemplate::chatml, r.messages) ==
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(refused_param(R"({"messages": []})", true) == "messages");
  CHECK(refused_param(R"({"messages": [{"role": "bot", "content": "x"}]})", true) == "messages[0].role");
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": "x"}, {"role": "user"}]})", true) == "messages[1].content");
  const auto top = cqs::parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3, "logprobs": true})",
                                           limits());
  CHECK(top.d.want_logprobs);
  CHECK(top.d.logprobs == 3);
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true) == "top_logprobs");
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2, "logprobs": false})", true) ==
        "top_logprobs");
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 21, "logprobs": true})", true) ==
        "top_logprobs");
  CHECK(cqs::parse_completion_request(R"({"prompt": "x", "logprobs": 4})", limits()).d.logprobs == 4);
}

// deterministic / sampling: log(P_k / Σ_j P_j) with P_k = ½ + atan((loc_k − C_k)/scale_k)/π;
// compatible: log softmax(loc_S); causal: none. The top list is sorted, ties to the lower id.
TEST_CASE_TEMPLATE("step logprobs: the renormalised OvR probabilities, the logits' softmax, the top list", T, float, double) {
  const T loc[] = {T(1.0), T(-2.0), T(3.0), T(1.0)}, scale[] = {T(0.5), T(2.0), T(4.0), T(0.5)},
          thr[] = {T(0.0), T(0.5), T(0.0), T(0.0)};
  std::vector<double> work;
  double P[4], total = 0;
  for (int k = 0; k < 4; ++k) {
    const T margin = (loc[k] - thr[k]) / scale[k];
    P[k] = 0.5 + std::atan(static_cast<double>(margin)) / std::numbers::pi;
    total += P[k];
  }
  const auto d = cqs::step_logprobs<T>(cqg::GenerationMode::deterministic, loc, scale, thr, 4, 0, 3, work);
  CHECK(d.available);
  CHECK(cqtest::close_rel(d.logprob, std::log(P[0] / total), 1e-12));
  REQUIRE(d.top.size() == 3);
  CHECK(d.top[0].token == 0);  // margin 2, tied with class 3: the lower id first
  CHECK(d.top[1].token == 3);
  CHECK(d.top[2].token == 2);  // margin 0.75
  CHECK(d.top[0].logprob == d.top[1].logprob);
  for (const auto& c : d.top) CHECK(cqtest::close_rel(c.logprob, std::log(P[c.token] / total), 1e-12));
  const auto all = cqs::step_logprobs<T>(cqg::GenerationMode::sampling, loc, scale, thr, 4, 1, 9, work);
  REQUIRE(all.top.size() == 4);
  double mass = 0;
  for (const auto& c : all.top) mass += std::exp(c.logprob);
  CHECK(cqtest::close_rel(mass, 1.0, 1e-12));
  CHECK(all.top.back().token == 1);
  CHECK(cqtest::close_rel(all.logprob, std::log(P[1] / total), 1e-12));

  const auto c = cqs::step_logprobs<T>(cqg::GenerationMode::compatible, loc, nullptr, nullptr, 4, 2, 2, work);
  const double z = std::exp(1.0) + std::exp(-2.0) + std::exp(3.0) + std::exp(1.0);
  CHECK(cqtest::close_rel(c.logprob, 3.0 - std::log(z), 1e-12));
  REQUIRE(c.top.size() == 2);
  CHECK(c.top[0].token == 2);
  CHECK(c.top[1].token == 0);
  CHECK(cqtest::close_rel(c.top[1].logprob, 1.0 - std::log(z), 1e-12));

  const auto none = cqs::step_logprobs<T>(cqg::GenerationMode::causal, loc, nullptr, thr, 4, 2, 2, work);
  CHECK_FALSE(none.available);
  CHECK(none.top.empty());
}

TEST_CASE("number reports: offset and text in the rendered text, intervals loc ± scale·tan(πp/2)") {
  cq::text::TokenizerOptions o;
  o.num_token_id = 20;
  const auto tok = cq::text::Tokenizer::from_file(CQ_TINY_TOKENIZER, o);  // " abcdefghijklmnopqrs" = 0…19
  auto t = [](std::int64_t id, double v = 0, double s = 0, double p = 0) {
    cqg::GeneratedToken g;
    g.id = id, g.value = v, g.scale = s, g.p_num = p;
    return g;
  };
  const std::vector<cqg::GeneratedToken> tokens = {t(1), t(0), t(20, 12.5, 2.0, 0.7), t(0), t(2), t(20, -3.25, 0.5, 0.4)};
  const auto text = cqg::render_tokens(tok, tokens);
  const std::vector<double> levels{0.5, 0.9};
  const auto reports = cqs::generated_numbers(tok, tokens, {}, levels);
  REQUIRE(reports.size() == 2);
  for (const auto& r : reports) CHECK(text.compare(r.text_offset, r.text.size(), r.text) == 0);
  CHECK(reports[0].token_index == 2);
  CHECK(reports[0].value == 12.5);
  CHECK(reports[0].loc == 12.5);
  CHECK(reports[0].p_num == 0.7);
  REQUIRE(reports[0].intervals.size() == 2);
  CHECK(cqtest::close_rel(reports[0].intervals[0].second[0], 12.5 - 2.0, 1e-12));  // tan(π/4) = 1
  CHECK(cqtest::close_rel(reports[0].intervals[1].second[1], 12.5 + 2.0 * std::tan(0.45 * std::numbers::pi), 1e-12));
  // from a later token on: only the numbers from there
  const auto later = cqs::generated_numbers(tok, tokens, {}, levels, 3);
  REQUIRE(later.size() == 1);
  CHECK(later[0].text_offset == reports[1].text_offset);
}

TEST_CASE("number reports: a model's interval calibration scales each level's half-width by its multiplier") {
  cq::eval::IntervalCalibration cal;
  cal.data = "cal.jsonl";
  cal.pooled.levels = {{0.5, 0, 0, 1.5}, {0.9, 0, 0, 0.5}};  // (level, rank, score, multiplier)
  const std::vector<double> levels{0.5, 0.9};
  const auto plain = cqs::central_intervals(12.5, 2.0, levels);
  const auto recalibrated = cqs::central_intervals(12.5, 2.0, levels, &cal);
  REQUIRE(recalibrated.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const double m = i == 0 ? 1.5 : 0.5;
    const double half = (plain[i].second[1] - plain[i].second[0]) / 2;
    CHECK(cqtest::close_rel(recalibrated[i].second[0], 12.5 - m * half, 1e-12));
    CHECK(cqtest::close_rel(recalibrated[i].second[1], 12.5 + m * half, 1e-12));
  }
  // a level the calibration was not fitted for is refused, naming what it has
  const std::vector<double> other{0.8};
  CHECK_THROWS_WITH_AS(cqs::central_intervals(12.5, 2.0, other, &cal), doctest::Contains("fitted for 0.5, 0.9"),
                       cq::DomainError);
}

TEST_CASE("chat template: ChatML recognised from tokenizer_config.json, anything else refused naming the file") {
  const auto dir = std::filesystem::temp_directory_path() / ("cq_test_chat_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "tokenizer_config.json";
  cq::text::TokenizerOptions o;
  o.num_token_id = 20;
  const auto plain = cq::text::Tokenizer::from_file(CQ_TINY_TOKENIZER, o);
  std::ofstream(file) << R"({"chat_template": "{% for m in messages %}<|im_start|>{{m.role}}\n{{m.content}}<|im_end|>{% endfor %}"})";
  // the template is ChatML, but this tokenizer has no <|im_start|>
  CHECK_THROWS_WITH_AS(cqs::recognise_chat_template(file, plain), doctest::Contains("no <|im_start|> or <|im_end|> token"),
                       cq::DomainError);
  std::ofstream(file) << R"({"chat_template": "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"})";
  CHECK_THROWS_WITH_AS(cqs::recognise_chat_template(file, plain), doctest::Contains("tokenizer_config.json: the chat_template is not recognised"),
                       cq::DomainError);
  std::ofstream(file) << R"({"eos_token": "x"})";
  CHECK_THROWS_WITH_AS(cqs::recognise_chat_template(file, plain), doctest::Contains("no \"chat_template\""), cq::DomainError);
  CHECK_THROWS_WITH_AS(cqs::recognise_chat_template(dir / "missing.json", plain), doctest::Contains("missing.json: cannot open"),
                       cq::DomainError);
  std::filesystem::remove_all(dir);
}
