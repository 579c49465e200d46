// The driver of a fuzz target in a build without libFuzzer (GCC): runs every file of the given
// corpus directories, then mutations of them (byte flips, insertions, deletions, repeats and
// hostile tokens such as 1e400 or 18446744073709551615) for --seconds S, from --seed N
// (printed, for replay). A finding aborts, as under libFuzzer.
//   fuzz_<target> [--seconds S] [--seed N] DIR...
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

/// `input` with one to four random edits.
std::string mutate(std::string input, std::mt19937_64& rng) {
  static const char* tokens[] = {"1e400", "-1", "18446744073709551615", "2147483647", "null", "\"yes\"",
                                 "[]", "{}", "0", "1e308", "-0", "9223372036854775807", "\xff", "\"\\u0000\""};
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = input.empty() ? 0 : rng() % (input.size() + 1);
    switch (rng() % 5) {
      case 0:
        if (!input.empty()) input[at % input.size()] = static_cast<char>(rng());
        break;
      case 1: input.insert(at, 1, static_cast<char>(rng())); break;
      case 2: input.erase(at, rng() % 8); break;
      case 3: input.insert(at, input.substr(rng() % (input.size() + 1), rng() % 16)); break;
      default: input.insert(at, tokens[rng() % std::size(tokens)]); break;
    }
  }
  return input;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  std::uint64_t seed = std::random_device{}();
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        std::ifstream in(entry.path(), std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  std::printf("[seed] %llu (replay with --seed %llu); %zu corpus files, %.1f s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), corpus.size(), seconds);
  for (const auto& c : corpus) run(c);
  std::mt19937_64 rng(seed);
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::size_t executions = corpus.size();
  while (std::chrono::steady_clock::now() < stop) {
    run(mutate(corpus[rng() % corpus.size()], rng));
    ++executions;
  }
  // Every input removes the scratch files it wrote; one left in the temporary directory is a finding
  // (the directories a target keeps across inputs, causalqwen_fuzz_kept_<pid>_*, are not counted:
  // they go when the process exits).
  const std::string own_prefix = "causalqwen_fuzz_" + std::to_string(::getpid()) + "_";
  int left_behind = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
    if (entry.path().filename().string().starts_with(own_prefix)) {
      std::fprintf(stderr, "left behind in the temporary directory: %s\n", entry.path().c_str());
      ++left_behind;
    }
  }
  if (left_behind > 0) return 1;
  std::printf("%zu executions, nothing found, no scratch file left behind\n", executions);
  return 0;
}
