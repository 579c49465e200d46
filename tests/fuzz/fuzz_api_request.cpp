// HTTP API request bodies → what `causalqwen serve` does with them before a token is decoded:
// the first byte picks the endpoint (completions, chat, score), the rest is the body, parsed and
// checked (serve/api_request.hpp); an accepted chat is rendered as ChatML; each prompt is encoded
// with numbers by a small byte-level tokenizer and checked by serve::Engine::submit against a tiny
// model's vocabulary and a 64-position slot (then cancelled). An ApiError, a FormatError or a
// DomainError is the expected refusal.
#include "fuzz_target.hpp"

#include <causalqwen/generate/text_generation.hpp>
#include <causalqwen/serve/api_request.hpp>
#include <causalqwen/serve/chat_template.hpp>
#include <causalqwen/serve/engine.hpp>

namespace {

namespace cq = causalqwen;
namespace cqs = causalqwen::serve;

struct Served {
  cq::text::Tokenizer tok;
  cq::model::CausalQwen<float> model;
  cqs::Engine<float> engine;
  Served() : tok(tokenizer()), model(config()), engine((model.init_random(3, 0.3), model), {2, 64}) {}
  static cq::text::Tokenizer tokenizer() {
    cq::text::TokenizerOptions o;
    o.num_token_id = 20;
    return cq::text::Tokenizer::from_file(CQ_FUZZ_TOKENIZER, o);
  }
  static cq::model::CausalConfig config() {
    cq::model::CausalConfig c;
    c.backbone = {23, 16, 24, 1, 4, 2, 1e-6, 1e4};
    c.causal_size = 16;
    c.num_classes = 21;
    c.num_token_id = 20;
    return c;
  }
};

}  // namespace

void run_one(std::string_view bytes) {
  static Served s;
  if (bytes.empty()) return;
  const char which = bytes[0];
  const std::string_view body = bytes.substr(1);
  cqs::ApiLimits limits;
  limits.model_name = "tiny";
  limits.max_tokens = 64;
  try {
    cqfuzz::refused_or_ok([&] {
      std::vector<std::string> prompts;
      cqs::DecodeRequest d;
      if (which % 3 == 0) {
        auto r = cqs::parse_completion_request(body, limits);
        prompts = r.prompts;
        d = r.d;
      } else if (which % 3 == 1) {
        auto r = cqs::parse_chat_request(body, limits);
        prompts = {cqs::render_chat(cqs::ChatTemplate::chatml, r.messages)};
        d = r.d;
      } else {
        (void)cqs::parse_score_request(body, limits);
        return;
      }
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        cqs::Request req;
        req.prompt = cq::generate::encode_prompt<float>(s.tok, prompts[i], i, d.max_tokens, 0, cq::generate::LongPrompt::error);
        req.decode = d.decode;
        req.max_new_tokens = d.max_tokens;
        s.engine.cancel(s.engine.submit(std::move(req)));
      }
      s.engine.step();  // the cancelled requests leave
    });
  } catch (const cqs::ApiError& e) {
    (void)cqs::error_json(e).dump();
  }
}
