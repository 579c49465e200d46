// One fuzz target = one function run_one(bytes). The project's own refusals (FormatError,
// DomainError) are the expected answer to bad input; anything else escaping (another exception,
// a crash, a sanitizer report) is a finding.
#pragma once
#include <causalqwen/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace cqfuzz {

/// Runs `body`, accepting the project's FormatError / DomainError as refusals.
template <class Body>
void refused_or_ok(Body&& body) {
  try {
    body();
  } catch (const causalqwen::FormatError&) {
  } catch (const causalqwen::DomainError&) {
  }
}

/// The scratch paths made while the current input runs; each is removed when the input ends.
inline std::vector<std::filesystem::path>& scratch_made() {
  static std::vector<std::filesystem::path> made;
  return made;
}

/// A path of this process's own in the temporary directory: causalqwen_fuzz_<pid>_<name>.
inline std::filesystem::path scratch(const char* name) {
  auto path = std::filesystem::temp_directory_path() / ("causalqwen_fuzz_" + std::to_string(::getpid()) + "_" + name);
  auto& made = scratch_made();
  if (std::find(made.begin(), made.end(), path) == made.end()) made.push_back(path);
  return path;
}

/// Removes, at the end of an input, every scratch file or directory it made.
struct ScratchSweep {
  ScratchSweep() = default;
  ScratchSweep(const ScratchSweep&) = delete;
  ScratchSweep& operator=(const ScratchSweep&) = delete;
  ~ScratchSweep() {
    for (const auto& path : scratch_made()) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
    scratch_made().clear();
  }
};

/// The directories made once per process and kept across inputs; removed when the process exits
/// normally (libFuzzer ends with exit(), the smoke driver returns from main).
struct KeptDirectories {
  std::vector<std::filesystem::path> made;
  KeptDirectories() = default;
  KeptDirectories(const KeptDirectories&) = delete;
  KeptDirectories& operator=(const KeptDirectories&) = delete;
  ~KeptDirectories() {
    for (const auto& path : made) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }
};

/// A directory of this process's own that every input may use (what a target sets up once, such
/// as files it reads beside the input): causalqwen_fuzz_kept_<pid>_<name> in the temporary
/// directory, created on the first call, kept until the process exits. Not a per-input scratch
/// path: ScratchSweep leaves it alone, and the smoke driver's check for files left behind by an
/// input does not count it.
inline std::filesystem::path kept_directory(const char* name) {
  static KeptDirectories kept;
  auto path = std::filesystem::temp_directory_path() / ("causalqwen_fuzz_kept_" + std::to_string(::getpid()) + "_" + name);
  if (std::find(kept.made.begin(), kept.made.end(), path) == kept.made.end()) {
    std::filesystem::create_directories(path);
    kept.made.push_back(path);
  }
  return path;
}

/// Writes `bytes` to `path` (replacing it) and returns the path.
inline std::filesystem::path write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

/// The bytes in a file of this process's own (readers that take a path get one).
inline std::filesystem::path as_file(std::string_view bytes, const char* name) { return write_file(scratch(name), bytes); }

}  // namespace cqfuzz

/// The target's body, defined by each fuzz_*.cpp.
void run_one(std::string_view bytes);

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const cqfuzz::ScratchSweep sweep;
  run_one(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
