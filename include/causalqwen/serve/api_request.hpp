/// The request bodies of the OpenAI-shaped HTTP API, parsed and checked: POST /v1/completions,
/// /v1/chat/completions and /v1/score. Every refusal is an ApiError carrying the HTTP status,
/// the OpenAI error type and the field at fault (`param`), with one line saying what was
/// expected; the server answers it as {"error": {"message", "type", "param", "code"}}.
///
///   field            completions, chat                     checked
///   model            string (optional)                     the served model's name
///   prompt           completions: string | [string, …]     1 … max_prompts strings
///   messages         chat: [{role, content}, …]            role system|user|assistant|tool,
///                                                          content a string or [{type: text, text}]
///   max_tokens       integer (chat also max_completion_tokens)  1 … limits.max_tokens (default 16)
///   temperature      number                                0 … 100, finite
///   top_p            number                                (0, 1]
///   top_k            integer                               ≥ 0 (0 = all; −1 is read as 0)
///   seed             integer                               any 64-bit (default 0)
///   stop             string | [string, …]                  at most 4, none empty
///   n                integer                               1 … limits.max_n
///   stream           boolean
///   logprobs         completions: integer 0 … 5 (the top list's length); chat: boolean
///   top_logprobs     chat: integer 0 … 20, > 0 only with logprobs true
///   echo             completions: boolean
///   mode             "deterministic" | "sampling" | "causal" | "compatible" (default deterministic)
///   shared_noise     boolean: sampling / causal, one noise draw per sequence
///   interval_levels  [number, …] in (0, 1), 1 … 8 of them (default [0.5, 0.9])
/// `user` and any other field are ignored. A field given as null takes its default.
#pragma once
#include "causalqwen/generate/decode_mode.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::serve {

/// A refused request: HTTP status, OpenAI error type, the field at fault ("" = none).
struct ApiError : std::runtime_error {
  int status;
  std::string type, param;
  ApiError(int status_code, std::string message, std::string param_name = {},
           std::string error_type = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status_code), type(std::move(error_type)),
        param(std::move(param_name)) {}
};

/// {"error": {"message", "type", "param", "code"}} (param null when there is none).
inline nlohmann::json error_json(const ApiError& e) {
  nlohmann::json err = {{"message", e.what()}, {"type", e.type}, {"code", nullptr}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  return {{"error", err}};
}

/// What the server allows.
struct ApiLimits {
  std::string model_name;         // the name /v1/models lists
  std::size_t max_tokens = 4096;  // the most tokens one choice may ask for
  std::size_t max_n = 16;         // choices per prompt
  std::size_t max_prompts = 64;   // prompts per request
};

/// The decoding fields shared by completions and chat.
struct DecodeRequest {
  generate::DecodeSettings decode;
  std::size_t max_tokens = 16;
  std::uint64_t seed = 0;
  std::vector<std::string> stop;
  std::size_t n = 1;
  bool stream = false;
  std::size_t logprobs = 0;  // the length of each token's top list (completions' logprobs, chat's top_logprobs)
  bool want_logprobs = false;
  bool echo = false;
  std::vector<double> interval_levels{0.5, 0.9};
};

struct ChatMessage {
  std::string role, content;
};

struct CompletionRequest {
  std::vector<std::string> prompts;
  DecodeRequest d;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  DecodeRequest d;
};

struct ScoreRequest {
  std::string text;
  std::vector<double> interval_levels{0.5, 0.9};
};

namespace detail_api {

inline std::string_view type_name(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::number_float: return "a number with a fraction";
    case nlohmann::json::value_t::discarded: return "nothing";
    default: return "an integer";
  }
}

/// The body as a JSON object (400 otherwise).
inline nlohmann::json parse_object(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON (expected a JSON object)");
  if (!j.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(j)));
  return j;
}

/// The field `name` when present and not null.
inline const nlohmann::json* field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline std::int64_t integer(const nlohmann::json& v, const char* name, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number_integer())
    throw ApiError(400, fmt::format("'{}' must be an integer in [{}, {}], got {}", name, lo, hi, type_name(v)), name);
  // an unsigned value above int64's range is read as the largest, which every range check refuses
  const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())
                             ? std::numeric_limits<std::int64_t>::max()
                             : v.get<std::int64_t>();
  if (x < lo || x > hi) throw ApiError(400, fmt::format("'{}' must be an integer in [{}, {}], got {}", name, lo, hi, x), name);
  return x;
}

inline double number(const nlohmann::json& v, const char* name, double lo, double hi, bool open_lo) {
  if (!v.is_number())
    throw ApiError(400, fmt::format("'{}' must be a number in {}{}, {}], got {}", name, open_lo ? "(" : "[", lo, hi, type_name(v)),
                   name);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || (open_lo ? x <= lo : x < lo))
    throw ApiError(400, fmt::format("'{}' must be a number in {}{}, {}], got {}", name, open_lo ? "(" : "[", lo, hi, x), name);
  return x;
}

inline bool boolean(const nlohmann::json& v, const char* name) {
  if (!v.is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false, got {}", name, type_name(v)), name);
  return v.get<bool>();
}

inline std::vector<double> levels(const nlohmann::json& v) {
  if (!v.is_array() || v.empty() || v.size() > 8)
    throw ApiError(400, "'interval_levels' must be an array of 1 to 8 numbers in (0, 1)", "interval_levels");
  std::vector<double> out;
  for (const auto& x : v) {
    if (!x.is_number() || !(x.get<double>() > 0 && x.get<double>() < 1))
      throw ApiError(400, "'interval_levels' must be an array of 1 to 8 numbers in (0, 1)", "interval_levels");
    out.push_back(x.get<double>());
  }
  return out;
}

inline void check_model(const nlohmann::json& j, const ApiLimits& limits) {
  if (const auto* m = field(j, "model")) {
    if (!m->is_string()) throw ApiError(400, fmt::format("'model' must be a string, got {}", type_name(*m)), "model");
    if (m->get<std::string>() != limits.model_name)
      throw ApiError(400, fmt::format("the model '{}' is not served here (this server serves '{}')", m->get<std::string>(),
                                      limits.model_name),
                     "model", "invalid_request_error");
  }
}

/// The decoding fields (see the file comment); `chat` reads chat's spellings of max_tokens and logprobs.
inline DecodeRequest decode_fields(const nlohmann::json& j, const ApiLimits& limits, bool chat) {
  DecodeRequest d;
  const auto max_tokens = static_cast<std::int64_t>(limits.max_tokens);
  if (const auto* v = field(j, "mode")) {
    if (!v->is_string()) throw ApiError(400, "'mode' must be one of deterministic, sampling, causal, compatible", "mode");
    const auto name = v->get<std::string>();
    bool known = false;
    for (auto m : {generate::GenerationMode::deterministic, generate::GenerationMode::sampling,
                   generate::GenerationMode::causal, generate::GenerationMode::compatible})
      if (generate::mode_name(m) == name) {
        d.decode.mode = m;
        known = true;
      }
    if (!known)
      throw ApiError(400, fmt::format("'mode' must be one of deterministic, sampling, causal, compatible, got '{}'", name), "mode");
  }
  // sampling's T defaults to 1, compatible's softmax temperature to 0 (greedy), as in `generate`
  d.decode.temperature = d.decode.mode == generate::GenerationMode::compatible ? 0.0 : 1.0;
  if (const auto* v = field(j, "temperature")) d.decode.temperature = number(*v, "temperature", 0, 100, false);
  if (const auto* v = field(j, "top_p")) d.decode.top_p = number(*v, "top_p", 0, 1, true);
  if (const auto* v = field(j, "top_k")) {
    const auto k = integer(*v, "top_k", -1, std::int64_t{1} << 31);
    d.decode.top_k = k < 0 ? 0 : static_cast<std::size_t>(k);
  }
  if (const auto* v = field(j, "shared_noise")) d.decode.shared_noise = boolean(*v, "shared_noise");
  const char* max_name = "max_tokens";
  const nlohmann::json* mt = field(j, "max_tokens");
  if (chat && !mt && field(j, "max_completion_tokens")) {
    max_name = "max_completion_tokens";
    mt = field(j, max_name);
  }
  if (mt) d.max_tokens = static_cast<std::size_t>(integer(*mt, max_name, 1, max_tokens));
  if (d.max_tokens > limits.max_tokens) d.max_tokens = limits.max_tokens;
  if (const auto* v = field(j, "seed")) {
    if (!v->is_number_integer()) throw ApiError(400, fmt::format("'seed' must be an integer, got {}", type_name(*v)), "seed");
    d.seed = v->is_number_unsigned() ? v->get<std::uint64_t>() : static_cast<std::uint64_t>(v->get<std::int64_t>());
  }
  if (const auto* v = field(j, "stop")) {
    if (v->is_string()) {
      d.stop.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= 4) {
      for (const auto& s : *v) {
        if (!s.is_string()) throw ApiError(400, "'stop' must be a string or an array of at most 4 strings", "stop");
        d.stop.push_back(s.get<std::string>());
      }
    } else {
      throw ApiError(400, "'stop' must be a string or an array of at most 4 strings", "stop");
    }
    for (const auto& s : d.stop)
      if (s.empty()) throw ApiError(400, "'stop' strings must not be empty", "stop");
  }
  if (const auto* v = field(j, "n")) d.n = static_cast<std::size_t>(integer(*v, "n", 1, static_cast<std::int64_t>(limits.max_n)));
  if (const auto* v = field(j, "stream")) d.stream = boolean(*v, "stream");
  if (const auto* v = field(j, "logprobs")) {
    if (chat) {
      d.want_logprobs = boolean(*v, "logprobs");
    } else {
      const auto k = integer(*v, "logprobs", 0, 5);
      d.want_logprobs = true;
      d.logprobs = static_cast<std::size_t>(k);
    }
  }
  if (chat)
    if (const auto* t = field(j, "top_logprobs")) {
      d.logprobs = static_cast<std::size_t>(integer(*t, "top_logprobs", 0, 20));
      if (d.logprobs > 0 && !d.want_logprobs)
        throw ApiError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
  if (!chat)
    if (const auto* v = field(j, "echo")) d.echo = boolean(*v, "echo");
  if (const auto* v = field(j, "interval_levels")) d.interval_levels = levels(*v);
  return d;
}

}  // namespace detail_api

/// POST /v1/completions (see the file comment).
inline CompletionRequest parse_completion_request(std::string_view body, const ApiLimits& limits) {
  using namespace detail_api;
  const auto j = parse_object(body);
  check_model(j, limits);
  CompletionRequest r;
  const auto* p = field(j, "prompt");
  if (!p) throw ApiError(400, "'prompt' is required: a string or an array of strings", "prompt");
  if (p->is_string()) {
    r.prompts.push_back(p->get<std::string>());
  } else if (p->is_array() && !p->empty() && p->size() <= limits.max_prompts) {
    for (const auto& s : *p) {
      if (!s.is_string())
        throw ApiError(400, fmt::format("'prompt' must be a string or an array of strings, got an array holding {}", type_name(s)),
                       "prompt");
      r.prompts.push_back(s.get<std::string>());
    }
  } else {
    throw ApiError(400, fmt::format("'prompt' must be a string or an array of 1 to {} strings, got {}", limits.max_prompts,
                                    p->is_array() ? fmt::format("an array of {}", p->size()) : std::string(type_name(*p))),
                   "prompt");
  }
  r.d = decode_fields(j, limits, false);
  if (r.prompts.size() * r.d.n > limits.max_prompts)
    throw ApiError(400, fmt::format("{} prompts with n = {} ask for {} choices, more than {}", r.prompts.size(), r.d.n,
                                    r.prompts.size() * r.d.n, limits.max_prompts),
                   "n");
  return r;
}

/// POST /v1/chat/completions (see the file comment).
inline ChatRequest parse_chat_request(std::string_view body, const ApiLimits& limits) {
  using namespace detail_api;
  const auto j = parse_object(body);
  check_model(j, limits);
  ChatRequest r;
  const auto* m = field(j, "messages");
  if (!m || !m->is_array() || m->empty())
    throw ApiError(400, "'messages' is required: a non-empty array of {\"role\", \"content\"} objects", "messages");
  for (std::size_t i = 0; i < m->size(); ++i) {
    const auto& msg = (*m)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!msg.is_object()) throw ApiError(400, fmt::format("'{}' must be an object with \"role\" and \"content\"", where), where);
    const auto* role = field(msg, "role");
    if (!role || !role->is_string())
      throw ApiError(400, fmt::format("'{}.role' must be one of system, user, assistant, tool", where), where + ".role");
    const auto name = role->get<std::string>();
    if (name != "system" && name != "user" && name != "assistant" && name != "tool" && name != "developer")
      throw ApiError(400, fmt::format("'{}.role' must be one of system, user, assistant, tool, got '{}'", where, name),
                     where + ".role");
    ChatMessage out{name == "developer" ? "system" : name, {}};
    const auto* content = field(msg, "content");
    if (content && content->is_string()) {
      out.content = content->get<std::string>();
    } else if (content && content->is_array()) {
      for (const auto& part : *content) {
        const auto* type = part.is_object() ? field(part, "type") : nullptr;
        const auto* text = part.is_object() ? field(part, "text") : nullptr;
        if (!type || !type->is_string() || type->get<std::string>() != "text" || !text || !text->is_string())
          throw ApiError(400, fmt::format("'{}.content' parts must be {{\"type\": \"text\", \"text\": string}}", where),
                         where + ".content");
        out.content += text->get<std::string>();
      }
    } else if (!(content == nullptr && name == "assistant")) {
      throw ApiError(400, fmt::format("'{}.content' must be a string or an array of text parts", where), where + ".content");
    }
    r.messages.push_back(std::move(out));
  }
  r.d = decode_fields(j, limits, true);
  if (r.d.n > limits.max_prompts) throw ApiError(400, fmt::format("'n' must be at most {}", limits.max_prompts), "n");
  return r;
}

/// POST /v1/score: {"text": string, "interval_levels": [...]} (model as for completions).
inline ScoreRequest parse_score_request(std::string_view body, const ApiLimits& limits) {
  using namespace detail_api;
  const auto j = parse_object(body);
  check_model(j, limits);
  ScoreRequest r;
  const auto* t = field(j, "text");
  if (!t || !t->is_string()) throw ApiError(400, "'text' is required: a string", "text");
  r.text = t->get<std::string>();
  if (const auto* v = field(j, "interval_levels")) r.interval_levels = levels(*v);
  return r;
}

}  // namespace causalqwen::serve
