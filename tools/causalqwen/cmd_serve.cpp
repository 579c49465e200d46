// causalqwen serve --model DIR [--tokenizer FILE] [--host H] [--port P] [--api-key KEY]
//                  [--weights f32|bf16|int8] [--threads N] [--parallel N] [--ctx-size N]
//                  [--max-queue N] [--max-body BYTES] [--timeout S] [--name NAME]
//
// An HTTP server shaped as the OpenAI API (docs/guide/serve.md lists every endpoint and field):
//   POST /v1/completions, /v1/chat/completions   generation, streamed as server-sent events
//                                                when "stream": true; each choice carries
//                                                "numbers": every generated number with its
//                                                Cauchy distribution and intervals
//   POST /v1/score                               a text's numbers scored teacher-forced
//   GET  /v1/models, /health, /metrics (Prometheus text), / (a page to try the model)
// Requests decode together in --parallel slots (serve::Engine: one batched forward per step);
// beyond them up to --max-queue choices wait, and more are refused with 503 and Retry-After.
// --api-key KEY: /v1/* and /metrics need "Authorization: Bearer KEY" (401 otherwise).
// SIGINT / SIGTERM: the server stops accepting, cancels what runs and exits 0.
// A client that leaves is noticed at the next piece written to it (streams) or by a poll of
// its connection every 100 ms (whole answers); its choices are cancelled at the next step.
// A model whose regression head is not Cauchy (config.json reg_head gaussian or mse) is refused.
#include "command.hpp"
#include "model_loading.hpp"
#include "numeric_options.hpp"
#include "serve_page.hpp"

#include <causalqwen/cauchy/distribution.hpp>
#include <causalqwen/core/threading.hpp>
#include <causalqwen/generate/text_generation.hpp>
#include <causalqwen/serve/api_request.hpp>
#include <causalqwen/serve/chat_template.hpp>
#include <causalqwen/serve/engine.hpp>
#include <causalqwen/serve/number_report.hpp>
#include <causalqwen/serve/score.hpp>

#include <fmt/core.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <csignal>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace {

namespace cq = causalqwen;
namespace cqg = causalqwen::generate;
namespace cqs = causalqwen::serve;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ServeOptions {
  cqcli::ModelOptions model;
  cqcli::WeightsOption weights;
  std::string host = "127.0.0.1", api_key, name;
  std::int64_t port = 8080, threads = 0, parallel = 4, ctx_size = 0, max_queue = 64, max_body = 1 << 20;
  double timeout = 30;
  bool no_calibration = false, no_prefix_cache = false;
};

/// A Prometheus histogram (cumulative buckets, sum, count).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double x) {
    std::lock_guard lock(m_);
    std::size_t i = 0;
    while (i < bounds_.size() && x > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += x;
    ++count_;
  }
  std::string text(const char* name, const char* help) const {
    std::lock_guard lock(m_);
    std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      acc += counts_[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], acc);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
    return out;
  }

 private:
  mutable std::mutex m_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct Metrics {
  std::mutex m;
  std::map<std::pair<std::string, int>, std::uint64_t> requests;  // (endpoint, status) → count
  std::atomic<std::uint64_t> prompt_tokens{0}, generated_tokens{0}, cancelled{0};
  Histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  Histogram token_latency{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
  void count(const std::string& endpoint, int status) {
    std::lock_guard lock(m);
    ++requests[{endpoint, status}];
  }
};

/// One token's entry in `logprobs`: its text piece, where it starts, its logprob (none in the
/// causal mode) and the likeliest classes' (text, logprob).
struct LogprobEntry {
  std::string piece;
  std::size_t offset = 0;
  std::optional<double> logprob;
  std::vector<std::pair<std::string, double>> top;
};

/// The `logprobs` object of a choice or a chunk from its entries, as the OpenAI API shapes it:
/// completions {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}] or null,
/// "text_offset"}; chat {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
/// "logprob", "bytes"}]}]}.
json logprobs_json(const std::vector<LogprobEntry>& entries, bool chat, bool with_top) {
  auto bytes = [](const std::string& s) { return std::vector<unsigned char>(s.begin(), s.end()); };
  auto number = [](const std::optional<double>& x) { return x ? json(*x) : json(nullptr); };
  if (chat) {
    json content = json::array();
    for (const auto& e : entries) {
      json top = json::array();
      for (const auto& [text, lp] : e.top) top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes(text)}});
      content.push_back({{"token", e.piece}, {"logprob", number(e.logprob)}, {"bytes", bytes(e.piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), offsets = json::array(), tops = json::array();
  for (const auto& e : entries) {
    tokens.push_back(e.piece);
    lps.push_back(number(e.logprob));
    offsets.push_back(e.offset);
    json top = json::object();
    for (const auto& [text, lp] : e.top)
      if (!top.contains(text)) top[text] = lp;  // two classes of the same text: the likelier
    tops.push_back(std::move(top));
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", with_top ? tops : json(nullptr)}, {"text_offset", offsets}};
}

/// The descriptor of the connection `req` came on, −1 if none is found: the open socket whose
/// peer is the request's remote address and port and whose own port is its local port
/// (cpp-httplib 0.11 hands a handler no other way to it).
int connection_socket(const httplib::Request& req) {
  auto endpoint = [](const sockaddr_storage& a, std::string& host) -> int {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& in = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
      host = text;
      return ntohs(in.sin_port);
    }
    if (a.ss_family == AF_INET6) {
      const auto& in = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &in.sin6_addr, text, sizeof text);
      host = text;
      return ntohs(in.sin6_port);
    }
    return -1;
  };
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    sockaddr_storage peer{}, self{};
    socklen_t peer_len = sizeof peer, self_len = sizeof self;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0)
      continue;
    std::string peer_host, self_host;
    if (endpoint(peer, peer_host) == req.remote_port && peer_host == req.remote_addr &&
        endpoint(self, self_host) == req.local_port) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

/// Whether the peer of socket `fd` has closed or reset the connection (a poll that does not wait).
bool peer_closed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/// What one choice (one engine request) has produced, shared by the engine's callbacks and the
/// HTTP handler that answers it.
struct ChoiceState {
  std::size_t index = 0;
  std::string prefix;               // the echoed prompt ("" without echo)
  std::size_t prompt_tokens = 0;
  std::unique_ptr<cqg::TextRow> row;
  std::size_t streamed = 0;         // bytes of the continuation sent in deltas
  std::size_t numbers_sent = 0;     // number reports sent in deltas
  std::vector<cqs::NumberReport> numbers;
  std::vector<LogprobEntry> logprobs;  // one per generated token (with logprobs)
  std::size_t logprobs_sent = 0;       // entries sent in deltas
  std::size_t rendered = 0;            // bytes of the continuation rendered up to the last entry
  cqg::GenerationResult result;
  std::string text;                 // the final continuation
  std::string finish_reason;        // "stop" | "length" | "cancelled"
  Clock::time_point submitted, last_token;
  std::uint64_t engine_id = 0;
};

/// A streamed event: a delta of one choice (text, the numbers it completes, the end).
struct Event {
  std::size_t choice = 0;
  std::string text;
  std::vector<cqs::NumberReport> numbers;
  std::vector<LogprobEntry> logprobs;
  std::optional<std::string> finish_reason;
};

/// One HTTP request's choices and the events they produced.
struct Job {
  std::mutex m;
  std::condition_variable cv;
  std::deque<Event> events;
  std::vector<ChoiceState> choices;
  std::size_t remaining = 0;
  std::atomic<bool> gone{false};  // the client left: stop at the next token
  bool stream = false;
  bool logprobs = false, top_logprobs = false;  // logprobs asked (with a top list)
  std::vector<double> levels;
  std::vector<std::string> stop;  // the stop strings the choices' TextRows read
};

json intervals_json(const std::vector<std::pair<double, std::array<double, 2>>>& intervals) {
  json out = json::object();
  for (const auto& [level, bounds] : intervals) out[fmt::format("{:g}", level)] = {bounds[0], bounds[1]};
  return out;
}

json number_json(const cqs::NumberReport& r, std::size_t offset_base) {
  return {{"text_offset", offset_base + r.text_offset}, {"text", r.text},   {"value", r.value}, {"loc", r.loc},
          {"scale", r.scale},                           {"p_num", r.p_num}, {"intervals", intervals_json(r.intervals)}};
}

json numbers_json(const std::vector<cqs::NumberReport>& rs, std::size_t offset_base) {
  json out = json::array();
  for (const auto& r : rs) out.push_back(number_json(r, offset_base));
  return out;
}

const char* finish_name(cqg::StopReason r) { return r == cqg::StopReason::length ? "length" : "stop"; }

class Server {
 public:
  Server(const ServeOptions& o) : o_(o) {}

  int run() {
    const auto tok_path = o_.model.tokenizer_path();
    if (!tok_path)
      throw cq::FormatError(fmt::format("{}: no tokenizer.json in the model directory; give --tokenizer FILE", o_.model.model_dir));
    loaded_ = o_.model.load<float>();
    // the API reports every number as a Cauchy forecast with Cauchy intervals
    if (const auto head = loaded_.model->config().reg_head; head != cq::model::RegHead::cauchy)
      throw cq::FormatError(fmt::format("{}/config.json: field 'reg_head' is \"{}\": serve reports every number as a Cauchy "
                                        "forecast with Cauchy intervals, so it serves models trained with --reg-head cauchy only "
                                        "(score this one with eval)",
                                        o_.model.model_dir, cq::model::reg_head_name(head)));
    o_.weights.apply(*loaded_.model);
    cq::text::TokenizerOptions tok_options;
    tok_options.num_token_id = static_cast<cq::text::TokenId>(loaded_.model->config().num_token_id);
    tok_ = std::make_unique<cq::text::Tokenizer>(cq::text::Tokenizer::from_file(tok_path->string(), tok_options));
    cqcli::require_matching(*tok_, *tok_path, loaded_.model->config(), o_.model.model_dir);
    eos_ = cqg::default_eos_ids(*tok_);
    // the position cap: config.json's, or format::default_max_position_embeddings when it states none
    const std::size_t positions = loaded_.max_position_embeddings.value_or(cq::format::default_max_position_embeddings);
    ctx_ = o_.ctx_size > 0 ? static_cast<std::size_t>(o_.ctx_size) : positions;
    if (ctx_ > positions)
      throw cq::FormatError(fmt::format("--ctx-size {} is more than the model's max_position_embeddings {} ({})", ctx_,
                                        positions, cqcli::position_cap_source(loaded_)));
    limits_.model_name = o_.name.empty() ? std::filesystem::path(o_.model.model_dir).filename().string() : o_.name;
    if (limits_.model_name.empty()) limits_.model_name = "causalqwen";
    limits_.max_tokens = ctx_;
    tokenizer_config_ = std::filesystem::path(o_.model.model_dir) / "tokenizer_config.json";
    try {
      chat_ = cqs::recognise_chat_template(tokenizer_config_, *tok_);
    } catch (const cq::DomainError& e) {
      chat_error_ = e.what();
    }
    if (!o_.no_calibration) calibration_ = cq::eval::load_interval_calibration(o_.model.model_dir);
    engine_ = std::make_unique<cqs::Engine<float>>(
        *loaded_.model, cqs::EngineOptions{static_cast<std::size_t>(o_.parallel), ctx_, !o_.no_prefix_cache});
    routes();
    if (!svr_.bind_to_port(o_.host, static_cast<int>(o_.port)))
      throw cq::FormatError(fmt::format("--host {} --port {}: cannot listen there (in use, or not an address of this machine)",
                                        o_.host, o_.port));
    std::thread engine_thread([this] { engine_thread_body(); });
    std::thread signal_thread([this] { wait_for_signal(); });
    fmt::print("serve: {} ({}, {} weights) on http://{}:{}/ with {} slots, {} positions each, a queue of {}\n",
               limits_.model_name, o_.model.model_dir, o_.weights.weights, o_.host, o_.port, o_.parallel, ctx_, o_.max_queue);
    std::fflush(stdout);
    svr_.listen_after_bind();
    // stopped: cancel what still runs, let the engine thread end
    stop_engine();
    engine_thread.join();
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    fmt::print("serve: stopped\n");
    return 0;
  }

  /// The signal thread: SIGINT or SIGTERM stops the server (they are blocked in every other thread).
  void wait_for_signal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    if (stopping_.exchange(true)) return;
    fmt::print("serve: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
    stop_engine();
    svr_.stop();
  }

 private:
  /// Runs `task` on the engine thread before its next step (only that thread touches the engine
  /// and the model, so an HTTP thread never waits for a step to submit or cancel).
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(inbox_m_);
      tasks_.push_back(std::move(task));
    }
    engine_cv_.notify_all();
  }

  void stop_engine() {
    stopping_ = true;
    post([this] {
      std::vector<std::shared_ptr<Job>> jobs;
      {
        std::lock_guard lock(inbox_m_);
        jobs.assign(jobs_.begin(), jobs_.end());
      }
      for (const auto& job : jobs)
        for (const auto& ch : job->choices) engine_->cancel(ch.engine_id);
    });
  }

  /// The engine thread: the posted tasks, then one engine step, until stopped and idle.
  void engine_loop() {
    for (;;) {
      std::deque<std::function<void()>> tasks;
      {
        std::unique_lock lock(inbox_m_);
        if (tasks_.empty() && engine_->idle()) {
          if (stopping_) return;
          engine_cv_.wait_for(lock, std::chrono::milliseconds(200));
        }
        tasks.swap(tasks_);
      }
      for (auto& t : tasks) t();
      if (!engine_->idle()) engine_->step();
      queued_ = engine_->queued();
      busy_ = engine_->running();
      reused_ = engine_->reused_tokens();
      prefill_forwards_ = engine_->prefill_forwards();
    }
  }

  /// engine_loop with engine_done_ set when it returns (whoever still waits gives up then).
  void engine_thread_body() {
    engine_loop();
    engine_done_ = true;
    engine_cv_.notify_all();
  }

  // ---- HTTP -------------------------------------------------------------------------------

  void routes() {
    svr_.set_payload_max_length(static_cast<std::size_t>(o_.max_body));
    const auto t = std::chrono::microseconds(static_cast<std::int64_t>(o_.timeout * 1e6));
    svr_.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(t).count(), (t.count() % 1000000));
    svr_.set_write_timeout(std::chrono::duration_cast<std::chrono::seconds>(t).count(), (t.count() % 1000000));
    svr_.set_keep_alive_timeout(2);  // an idle connection also holds up a shutdown this long
    const std::size_t workers = std::min<std::size_t>(256, static_cast<std::size_t>(o_.parallel + o_.max_queue) + 8);
    svr_.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    svr_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const int s = res.status;
      const std::string message = s == 413   ? fmt::format("the request body is larger than --max-body {} bytes", o_.max_body)
                                  : s == 404 ? fmt::format("no endpoint {} {}", req.method, req.path)
                                  : s == 405 ? fmt::format("{} does not take {}", req.path, req.method)
                                  : s == 400 ? std::string("the request could not be read: malformed HTTP, or not sent whole within --timeout")
                                             : fmt::format("HTTP {}", s);
      res.set_content(cqs::error_json(cqs::ApiError(s, message)).dump(), "application/json");
      metrics_.count(req.path, s);
    });
    svr_.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      fail(req, res, cqs::ApiError(500, what, "", "server_error"));
    });
    svr_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(cqcli::serve_page_html, "text/html; charset=utf-8");
    });
    svr_.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_content(json{{"status", stopping_ ? "stopping" : "ok"}}.dump(), "application/json");
      metrics_.count(req.path, 200);
    });
    svr_.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    svr_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      const json model = {{"id", limits_.model_name}, {"object", "model"}, {"created", started_}, {"owned_by", "causalqwen"}};
      res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
      metrics_.count(req.path, 200);
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      guarded(req, res, [&] {
        auto r = cqs::parse_completion_request(req.body, limits_);
        start(req, res, r.prompts, r.d, false);
      });
    });
    svr_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      guarded(req, res, [&] {
        auto r = cqs::parse_chat_request(req.body, limits_);
        if (!chat_) throw cqs::ApiError(400, "this model cannot chat: " + chat_error_, "messages");
        r.d.echo = false;
        start(req, res, {cqs::render_chat(*chat_, r.messages)}, r.d, true);
      });
    });
    svr_.Post("/v1/score", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      guarded(req, res, [&] { score(req, res); });
    });
  }

  bool authorised(const httplib::Request& req, httplib::Response& res) {
    if (o_.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + o_.api_key) return true;
    fail(req, res, cqs::ApiError(401, "a valid API key is needed: send the header \"Authorization: Bearer KEY\"", "",
                                 "invalid_request_error"));
    return false;
  }

  void fail(const httplib::Request& req, httplib::Response& res, const cqs::ApiError& e) {
    res.status = e.status;
    res.set_content(cqs::error_json(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    metrics_.count(req.path, e.status);
  }

  template <class F>
  void guarded(const httplib::Request& req, httplib::Response& res, F&& f) {
    try {
      if (stopping_) throw cqs::ApiError(503, "the server is stopping", "", "server_error");
      f();
    } catch (const cqs::ApiError& e) {
      fail(req, res, e);
    } catch (const cq::DomainError& e) {
      fail(req, res, cqs::ApiError(400, e.what()));
    } catch (const cq::FormatError& e) {
      fail(req, res, cqs::ApiError(400, e.what()));
    }
  }

  // ---- generation -------------------------------------------------------------------------

  /// Submits every choice of a completion or chat request and answers it (streamed or whole).
  void start(const httplib::Request& req, httplib::Response& res, const std::vector<std::string>& prompts,
             const cqs::DecodeRequest& d, bool chat) {
    auto job = std::make_shared<Job>();
    job->stream = d.stream;
    job->logprobs = d.want_logprobs;
    job->top_logprobs = d.logprobs > 0;
    job->levels = d.interval_levels;
    check_levels(job->levels);
    job->stop = d.stop;
    // encode and check every prompt before anything is queued
    std::vector<cqg::PromptInput> inputs;
    const std::string param = chat ? "messages" : "prompt";
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      try {
        inputs.push_back(cqg::encode_prompt<float>(*tok_, prompts[i], i, d.max_tokens, 0, cqg::LongPrompt::error));
      } catch (const cq::DomainError& e) {
        throw cqs::ApiError(400, e.what(), param);
      }
      const std::size_t n = inputs.back().ids.size();
      if (n + d.max_tokens - 1 > ctx_)
        throw cqs::ApiError(400,
                            fmt::format("prompt {} has {} tokens; with max_tokens {} it needs {} positions, more than the {} "
                                        "of this server's context (--ctx-size)",
                                        i, n, d.max_tokens, n + d.max_tokens - 1, ctx_),
                            n >= ctx_ ? param : "max_tokens");
    }
    const std::size_t count = prompts.size() * d.n;
    job->choices.resize(count);
    job->remaining = count;
    const auto now = Clock::now();
    std::vector<cqs::Request> requests;
    for (std::size_t c = 0; c < count; ++c) {
      auto& ch = job->choices[c];
      ch.index = c;
      ch.prefix = d.echo ? prompts[c / d.n] : std::string();
      ch.prompt_tokens = inputs[c / d.n].ids.size();
      ch.row = std::make_unique<cqg::TextRow>(*tok_, job->stop, cqg::RenderOptions{});
      ch.submitted = ch.last_token = now;
      cqs::Request r;
      r.prompt = inputs[c / d.n];
      r.prompt.seed = cqg::row_seed(d.seed, c);
      r.decode = d.decode;
      r.max_new_tokens = d.max_tokens;
      r.eos_ids = eos_;
      r.on_token = [this, job, c](const cqg::GenerationResult& so_far) { return on_token(*job, c, so_far); };
      r.logprobs = d.want_logprobs;
      r.top_logprobs = d.logprobs;
      r.on_logprobs = [this, job, c](const cqg::GenerationResult& so_far, cqs::StepLogprobs&& lp) {
        on_logprobs(*job, c, so_far, std::move(lp));
      };
      r.on_done = [this, job, c](cqg::GenerationResult&& result, cqs::Outcome outcome) {
        on_done(*job, c, std::move(result), outcome);
      };
      requests.push_back(std::move(r));
    }
    {
      std::lock_guard lock(inbox_m_);
      if (stopping_) throw cqs::ApiError(503, "the server is stopping", "", "server_error");
      // choices beyond the free slots wait; the queue holds at most --max-queue of them (the
      // engine's counts as of its last step, plus the choices posted since)
      const std::size_t slots = static_cast<std::size_t>(o_.parallel), running = std::min(slots, busy_.load());
      const std::size_t free_slots = slots - running, queued = queued_ + posted_;
      const std::size_t waiting = queued > free_slots ? queued - free_slots : 0;
      const std::size_t free_after = free_slots > queued ? free_slots - queued : 0;
      if (waiting + (count > free_after ? count - free_after : 0) > static_cast<std::size_t>(o_.max_queue)) {
        res.set_header("Retry-After", "1");
        throw cqs::ApiError(503,
                            fmt::format("the server is busy: {} slots run and {} choices wait, the queue holds {} "
                                        "(--max-queue); retry later",
                                        running, waiting, o_.max_queue),
                            "", "server_error");
      }
      posted_ += count;
      jobs_.insert(job);
    }
    auto pending = std::make_shared<std::vector<cqs::Request>>(std::move(requests));
    post([this, job, pending] {
      {
        std::lock_guard lock(inbox_m_);
        posted_ -= pending->size();
      }
      for (std::size_t c = 0; c < pending->size(); ++c) {
        try {
          job->choices[c].engine_id = engine_->submit(std::move((*pending)[c]));
        } catch (const cq::DomainError&) {  // checked before: the choice ends at once
          on_done(*job, c, {}, cqs::Outcome::cancelled);
        }
      }
    });
    for (const auto& in : inputs) metrics_.prompt_tokens += in.ids.size() * d.n;
    const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id_++);
    const std::int64_t created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (d.stream) stream(req, res, job, id, created, chat);
    else whole(req, res, job, d, id, created, chat);
  }

  /// Engine thread, after each token of choice c when it asked for logprobs (before on_token):
  /// the token's entry, its piece the text it adds to the rendered continuation.
  void on_logprobs(Job& job, std::size_t c, const cqg::GenerationResult& so_far, cqs::StepLogprobs&& lp) {
    LogprobEntry e;
    const std::string now = cqg::render_tokens(*tok_, so_far.tokens);
    std::lock_guard lock(job.m);
    auto& ch = job.choices[c];
    e.piece = now.size() >= ch.rendered ? now.substr(ch.rendered) : std::string();
    e.offset = ch.prefix.size() + ch.rendered;
    ch.rendered = std::max(ch.rendered, now.size());
    if (lp.available) e.logprob = lp.logprob;
    for (const auto& t : lp.top) {
      const cq::text::TokenId id = static_cast<cq::text::TokenId>(t.token);
      e.top.emplace_back(tok_->decode(std::span<const cq::text::TokenId>(&id, 1)), t.logprob);
    }
    ch.logprobs.push_back(std::move(e));
  }

  /// The entries of choice c not sent yet (streams).
  static std::vector<LogprobEntry> unsent_logprobs(ChoiceState& ch) {
    std::vector<LogprobEntry> out(ch.logprobs.begin() + static_cast<std::ptrdiff_t>(ch.logprobs_sent), ch.logprobs.end());
    ch.logprobs_sent = ch.logprobs.size();
    return out;
  }

  /// Engine thread, after each token of choice c.
  bool on_token(Job& job, std::size_t c, const cqg::GenerationResult& so_far) {
    const auto now = Clock::now();
    Event ev;
    bool stop = false;
    {
      std::lock_guard lock(job.m);
      auto& ch = job.choices[c];
      const double since = std::chrono::duration<double>(now - ch.last_token).count();
      if (so_far.tokens.size() == 1) metrics_.ttft.observe(std::chrono::duration<double>(now - ch.submitted).count());
      else metrics_.token_latency.observe(since);
      ch.last_token = now;
      ++metrics_.generated_tokens;
      stop = ch.row->update(so_far, job.stream ? &ev.text : nullptr);
      if (so_far.tokens.back().id == tok_->num_token_id()) {
        auto fresh = cqs::generated_numbers(*tok_, so_far.tokens, {}, job.levels, so_far.tokens.size() - 1, calibration());
        for (auto& n : fresh) ch.numbers.push_back(std::move(n));
      }
      if (job.stream) {
        ch.streamed += ev.text.size();
        while (ch.numbers_sent < ch.numbers.size() &&
               ch.numbers[ch.numbers_sent].text_offset + ch.numbers[ch.numbers_sent].text.size() <= ch.streamed)
          ev.numbers.push_back(ch.numbers[ch.numbers_sent++]);
        if (!ev.text.empty() || !ev.numbers.empty()) {
          ev.choice = c;
          ev.logprobs = unsent_logprobs(ch);
          job.events.push_back(std::move(ev));
        }
      }
    }
    job.cv.notify_all();
    return stop || job.gone;
  }

  /// Engine thread, once per choice.
  void on_done(Job& job, std::size_t c, cqg::GenerationResult&& result, cqs::Outcome outcome) {
    {
      std::lock_guard lock(job.m);
      auto& ch = job.choices[c];
      ch.result = std::move(result);
      Event ev;
      ev.choice = c;
      ch.text = ch.row->finish(ch.result, &ev.text);
      // numbers cut off by a stop string are not part of the answer
      while (!ch.numbers.empty() && ch.numbers.back().text_offset + ch.numbers.back().text.size() > ch.text.size())
        ch.numbers.pop_back();
      // a client gone stops its choices through the hook or by cancelling them: cancelled either way
      const bool cancelled = outcome == cqs::Outcome::cancelled || job.gone;
      ch.finish_reason = cancelled ? "cancelled" : finish_name(ch.result.stop);
      if (cancelled) ++metrics_.cancelled;
      if (job.stream) {
        ch.streamed += ev.text.size();
        while (ch.numbers_sent < ch.numbers.size()) ev.numbers.push_back(ch.numbers[ch.numbers_sent++]);
        ev.logprobs = unsent_logprobs(ch);
        ev.finish_reason = ch.finish_reason;
        job.events.push_back(std::move(ev));
      }
      --job.remaining;
    }
    job.cv.notify_all();
  }

  /// Cancels the job's choices still running (a client that left).
  void abandon(const std::shared_ptr<Job>& job) {
    job->gone = true;
    post([this, job] {
      for (const auto& ch : job->choices) engine_->cancel(ch.engine_id);
    });
  }

  void forget(const std::shared_ptr<Job>& job) {
    std::lock_guard lock(inbox_m_);
    jobs_.erase(job);
  }

  /// Waits for every choice, then answers with the whole completion.
  void whole(const httplib::Request& req, httplib::Response& res, const std::shared_ptr<Job>& job, const cqs::DecodeRequest& d,
             const std::string& id, std::int64_t created, bool chat) {
    // a client that closes its connection before the answer cancels its choices
    const int socket = connection_socket(req);
    bool complete = false, left = false;
    for (;;) {
      {
        std::unique_lock lock(job->m);
        complete = job->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return job->remaining == 0; });
      }
      if (complete || engine_done_) break;
      if (!left && socket >= 0 && peer_closed(socket)) {
        left = true;
        abandon(job);
      }
    }
    forget(job);
    if (left) {  // nobody to answer
      res.status = 499;
      metrics_.count(req.path, 499);
      return;
    }
    if (!complete) throw cqs::ApiError(503, "the server stopped before the answer was complete", "", "server_error");
    json choices = json::array();
    std::size_t completion_tokens = 0, prompt_tokens = 0;
    for (std::size_t c = 0; c < job->choices.size(); ++c) {
      const auto& ch = job->choices[c];
      if (ch.finish_reason == "cancelled") throw cqs::ApiError(503, "the server stopped before the answer was complete", "", "server_error");
      completion_tokens += ch.result.tokens.size();
      if (c % d.n == 0) prompt_tokens += ch.prompt_tokens;
      json choice = {{"index", c}, {"finish_reason", ch.finish_reason}, {"numbers", numbers_json(ch.numbers, ch.prefix.size())}};
      choice["logprobs"] = d.want_logprobs ? logprobs_json(ch.logprobs, chat, d.logprobs > 0) : json(nullptr);
      if (chat) choice["message"] = {{"role", "assistant"}, {"content", ch.text}};
      else choice["text"] = ch.prefix + ch.text;
      choices.push_back(std::move(choice));
    }
    const json body = {{"id", id},
                       {"object", chat ? "chat.completion" : "text_completion"},
                       {"created", created},
                       {"model", limits_.model_name},
                       {"choices", choices},
                       {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                                  {"total_tokens", prompt_tokens + completion_tokens}}}};
    res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    metrics_.count(req.path, 200);
  }

  /// Answers with server-sent events as the choices grow.
  void stream(const httplib::Request& req, httplib::Response& res, const std::shared_ptr<Job>& job, const std::string& id,
              std::int64_t created, bool chat) {
    metrics_.count(req.path, 200);
    res.set_header("Cache-Control", "no-cache");
    auto head = std::make_shared<std::vector<char>>(job->choices.size(), 0);  // chat: role sent
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, id, created, chat, head](std::size_t, httplib::DataSink& sink) {
          auto chunk = [&](const json& choice) {
            const json body = {{"id", id},
                               {"object", chat ? "chat.completion.chunk" : "text_completion"},
                               {"created", created},
                               {"model", limits_.model_name},
                               {"choices", json::array({choice})}};
            const std::string line = "data: " + body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          std::deque<Event> events;
          bool finished = false;
          {
            std::unique_lock lock(job->m);
            job->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !job->events.empty() || job->remaining == 0; });
            events.swap(job->events);
            finished = job->remaining == 0;
          }
          for (auto& ev : events) {
            const auto& ch = job->choices[ev.choice];
            json choice = {{"index", ev.choice}};
            choice["logprobs"] = job->logprobs ? logprobs_json(ev.logprobs, chat, job->top_logprobs) : json(nullptr);
            choice["finish_reason"] = ev.finish_reason && *ev.finish_reason != "cancelled" ? json(*ev.finish_reason) : json(nullptr);
            if (!ev.numbers.empty()) choice["numbers"] = numbers_json(ev.numbers, ch.prefix.size());
            if (chat) {
              json delta = json::object();
              if (!(*head)[ev.choice]) {
                delta["role"] = "assistant";
                (*head)[ev.choice] = 1;
              }
              if (!ev.text.empty() || delta.empty()) delta["content"] = ev.text;
              choice["delta"] = delta;
            } else {
              std::string text = ev.text;
              if (!(*head)[ev.choice]) {
                text = ch.prefix + text;
                (*head)[ev.choice] = 1;
              }
              choice["text"] = text;
            }
            if (!chunk(choice)) {
              abandon(job);
              return false;
            }
          }
          if (!sink.is_writable()) {
            abandon(job);
            return false;
          }
          if (finished) {
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
          }
          return true;
        },
        [this, job](bool success) {
          if (!success) abandon(job);
          forget(job);
        });
  }

  /// The recalibrated intervals need a multiplier for every level asked: 400 naming the levels
  /// the model's calibration.json was fitted for otherwise.
  void check_levels(const std::vector<double>& levels) const {
    if (!calibration_) return;
    for (const double p : levels) {
      if (calibration_->has_level(p)) continue;
      std::string have;
      for (const double q : calibration_->levels()) have += fmt::format("{}{}", have.empty() ? "" : ", ", q);
      throw cqs::ApiError(400, fmt::format("'interval_levels': the model's interval calibration (calibration.json) has no "
                                           "multiplier for level {}; it was fitted for {}", p, have),
                          "interval_levels");
    }
  }

  const cq::eval::IntervalCalibration* calibration() const { return calibration_ ? &*calibration_ : nullptr; }

  void score(const httplib::Request& req, httplib::Response& res) {
    const auto r = cqs::parse_score_request(req.body, limits_);
    check_levels(r.interval_levels);
    // on the engine thread: the model's evaluation shares its caches with decoding
    auto done = std::make_shared<std::promise<cqs::TextScore>>();
    auto result = done->get_future();
    post([this, r, done] {
      try {
        done->set_value(cqs::score_text<float>(*loaded_.model, *tok_, r.text, r.interval_levels, ctx_, calibration()));
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
      if (engine_done_) throw cqs::ApiError(503, "the server stopped before the answer was complete", "", "server_error");
    cqs::TextScore s;
    try {
      s = result.get();
    } catch (const cq::DomainError& e) {
      throw cqs::ApiError(400, e.what(), "text");
    }
    json numbers = json::array();
    for (const auto& n : s.numbers)
      numbers.push_back({{"text_offset", n.text_offset}, {"text", n.text},       {"value", n.value},
                         {"loc", n.loc},                 {"scale", n.scale},     {"p_num", n.p_num},
                         {"pit", n.pit},                 {"nll", n.nll},         {"intervals", intervals_json(n.intervals)}});
    res.set_content(json{{"object", "score"}, {"model", limits_.model_name}, {"tokens", s.tokens}, {"numbers", numbers}}
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
    metrics_.count(req.path, 200);
  }

  std::string metrics_text() {
    std::string out = "# HELP causalqwen_requests_total HTTP requests answered, by endpoint and status\n"
                      "# TYPE causalqwen_requests_total counter\n";
    {
      std::lock_guard lock(metrics_.m);
      for (const auto& [key, n] : metrics_.requests)
        out += fmt::format("causalqwen_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
    }
    out += fmt::format("# HELP causalqwen_prompt_tokens_total prompt tokens of the accepted choices\n"
                       "# TYPE causalqwen_prompt_tokens_total counter\ncausalqwen_prompt_tokens_total {}\n",
                       metrics_.prompt_tokens.load());
    out += fmt::format("# HELP causalqwen_generated_tokens_total tokens generated\n"
                       "# TYPE causalqwen_generated_tokens_total counter\ncausalqwen_generated_tokens_total {}\n",
                       metrics_.generated_tokens.load());
    out += fmt::format("# HELP causalqwen_prompt_tokens_reused_total prompt tokens taken from a kept prompt (the prefix cache)\n"
                       "# TYPE causalqwen_prompt_tokens_reused_total counter\ncausalqwen_prompt_tokens_reused_total {}\n",
                       reused_.load());
    out += fmt::format("# HELP causalqwen_prefill_forwards_total prefill forwards (prompts joining at one step share them)\n"
                       "# TYPE causalqwen_prefill_forwards_total counter\ncausalqwen_prefill_forwards_total {}\n",
                       prefill_forwards_.load());
    out += fmt::format("# HELP causalqwen_cancelled_total choices cancelled (client gone, shutdown)\n"
                       "# TYPE causalqwen_cancelled_total counter\ncausalqwen_cancelled_total {}\n",
                       metrics_.cancelled.load());
    out += fmt::format("# HELP causalqwen_queue_length choices waiting for a slot\n"
                       "# TYPE causalqwen_queue_length gauge\ncausalqwen_queue_length {}\n",
                       queued_.load());
    out += fmt::format("# HELP causalqwen_slots_busy slots decoding\n"
                       "# TYPE causalqwen_slots_busy gauge\ncausalqwen_slots_busy {}\n",
                       busy_.load());
    out += metrics_.ttft.text("causalqwen_time_to_first_token_seconds", "from a choice's submission to its first token");
    out += metrics_.token_latency.text("causalqwen_inter_token_seconds", "between consecutive tokens of a choice");
    return out;
  }

  ServeOptions o_;
  cq::checkpoint::LoadedModel<float> loaded_;
  std::unique_ptr<cq::text::Tokenizer> tok_;
  std::vector<std::int64_t> eos_;
  std::size_t ctx_ = 0;
  cqs::ApiLimits limits_;
  std::filesystem::path tokenizer_config_;
  std::optional<cqs::ChatTemplate> chat_;
  std::string chat_error_;
  std::optional<cq::eval::IntervalCalibration> calibration_;  // DIR/calibration.json, when present
  std::unique_ptr<cqs::Engine<float>> engine_;
  std::mutex inbox_m_;  // guards tasks_, jobs_, posted_
  std::condition_variable engine_cv_;
  std::deque<std::function<void()>> tasks_;
  std::set<std::shared_ptr<Job>> jobs_;  // the jobs not answered yet
  std::size_t posted_ = 0;               // choices posted, not yet submitted to the engine
  std::atomic<std::size_t> queued_{0}, busy_{0};  // the engine's queue and busy slots after its last step
  std::atomic<std::uint64_t> reused_{0}, prefill_forwards_{0};  // the engine's counts after its last step
  std::atomic<bool> engine_done_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> next_id_{1};
  std::int64_t started_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  Metrics metrics_;
  httplib::Server svr_;
};

const cqcli::Registration reg_serve{"serve", [](CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* sub = app.add_subcommand("serve", "an OpenAI-compatible HTTP server whose numbers carry their Cauchy distribution");
  o->model.add_to(sub);
  o->weights.add_to(sub);
  sub->add_option("--host", o->host, "address to listen on (default 127.0.0.1)");
  cqcli::add_integer(sub, "--port", o->port, {1, 65535}, "port");
  sub->add_option("--api-key", o->api_key, "require \"Authorization: Bearer KEY\" on /v1/* and /metrics");
  cqcli::add_integer(sub, "--threads", o->threads, {0, cqcli::max_threads}, "compute threads (0: all cores)");
  cqcli::add_integer(sub, "--parallel", o->parallel, {1, 256}, "decoding slots");
  cqcli::add_integer(sub, "--ctx-size", o->ctx_size, {0, std::int64_t{1} << 20},
                     "positions per slot (prompt + max_tokens - 1; 0: max_position_embeddings, or 32768 without it)");
  cqcli::add_integer(sub, "--max-queue", o->max_queue, {0, 100000}, "choices that may wait for a slot; more get 503");
  cqcli::add_integer(sub, "--max-body", o->max_body, {1, std::int64_t{1} << 30},
                     "largest request body in bytes; larger get 413");
  cqcli::add_real(sub, "--timeout", o->timeout, cqcli::RealRange::closed(0.1, 3600),
                  "seconds a client may take to send a request or read a response");
  sub->add_option("--name", o->name, "the model's name in the API (default: the model directory's name)");
  sub->add_flag("--no-calibration", o->no_calibration,
                "report the model's own intervals even when DIR/calibration.json recalibrates them");
  sub->add_flag("--no-prefix-cache", o->no_prefix_cache,
                "compute every prompt whole instead of starting from a slot's kept prompt that begins it");
  sub->callback([o] {
    if (o->threads > 0) cq::set_threads(static_cast<std::size_t>(o->threads));
    // SIGINT and SIGTERM go to the signal thread only
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    Server server(*o);
    server.run();
  });
}};

}  // namespace
