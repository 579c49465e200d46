// Helpers of the io tests: a temporary directory removed at the end of a test, files written
// byte by byte, and hand-built safetensors files (a header text and a data section).
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace iotest {

/// A fresh directory under the system's temporary directory, removed with its content.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "causalqwen-io-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The 8-byte little-endian length n followed by `header` (n = header.size() unless given).
inline std::string length_prefixed(const std::string& header, std::uint64_t n) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header;
}

/// A safetensors file made of `header` (JSON text, unpadded) and `data`.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return length_prefixed(header, header.size()) + data;
}

/// `count` float32 values 0, 1, 2, … as little-endian bytes.
inline std::string float_bytes(std::size_t count) {
  std::string out(count * 4, '\0');
  for (std::size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(out.data() + 4 * i, &v, 4);
  }
  return out;
}

}  // namespace iotest
