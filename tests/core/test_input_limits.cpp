// The library's input limits: sizes that allocate (core/checked_size.hpp: products and sums that
// would pass 2^64 − 1, byte counts above the memory available now, std::bad_alloc named), the line
// reader (core/line_reader.hpp: lines past the limit, read errors, '\r\n', a last line without
// '\n'), and the escaping of bytes in JSON parse errors (core/json.hpp).
#include "../support/test_support.hpp"

#include <causalqwen/core/checked_size.hpp>
#include <causalqwen/core/json.hpp>
#include <causalqwen/core/line_reader.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <unistd.h>

namespace cq = causalqwen;

namespace {
constexpr std::size_t max_size = std::numeric_limits<std::size_t>::max();

/// A file under the system's temporary directory holding `text`, removed at the end of scope.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text) {
    path = std::filesystem::temp_directory_path() / fmt::format("cq_input_limits_{}_{}", ::getpid(), counter()++);
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::vector<std::string> all_lines(cq::LineReader& in) {
  std::vector<std::string> out;
  for (std::string line; in.next(line);) out.push_back(line);
  return out;
}
}  // namespace

TEST_CASE("checked_mul and checked_add refuse what passes 2^64 - 1 and name what was sized") {
  CHECK(cq::checked_mul(0, max_size, "x") == 0);
  CHECK(cq::checked_mul(std::size_t{1} << 32, (std::size_t{1} << 32) - 1, "x") == max_size - (std::size_t{1} << 32) + 1);
  CHECK(cq::checked_add(max_size - 1, 1, "x") == max_size);
  // the train batch of the reproducer: 288230376151711745 rows of 64 tokens wrap to 64
  const auto m = cqtest::error_message<cq::SizeError>([] { cq::checked_mul(288230376151711745ull, 64, "a [B,S] batch"); });
  CHECK(m.find("a [B,S] batch: the size 288230376151711745 x 64 does not fit in 64 bits") != std::string::npos);
  CHECK(cqtest::error_message<cq::SizeError>([] { cq::checked_add(max_size, 1, "the sum"); })
            .find("the sum: the size") != std::string::npos);
  CHECK(cq::checked_product({2, 3, 7}, "x") == 42);
  CHECK_THROWS_AS(cq::checked_product({std::size_t{1} << 32, std::size_t{1} << 31, 2}, "x"), cq::SizeError);
  CHECK_THROWS_AS(cq::checked_bytes<double>(max_size / 4, "x"), cq::SizeError);
  // a SizeError is a DomainError: the programs' catch of bad arguments holds it
  CHECK_THROWS_AS(cq::checked_mul(max_size, 2, "x"), cq::DomainError);
}

TEST_CASE("parse_mem_available reads MemAvailable of /proc/meminfo's text, refuses what it cannot read") {
  const std::string meminfo = "MemTotal:       24683568 kB\nMemFree:        21313256 kB\nMemAvailable:   21909100 kB\n";
  CHECK(cq::parse_mem_available(meminfo) == std::size_t{21909100} * 1024);
  CHECK(cq::parse_mem_available("MemAvailable: 0 kB") == std::size_t{0});
  CHECK(!cq::parse_mem_available("MemTotal: 24683568 kB\nMemFree: 21313256 kB\n"));  // a kernel without it
  CHECK(!cq::parse_mem_available("XMemAvailable: 5 kB\n"));                          // not at a line's start
  CHECK(!cq::parse_mem_available("MemAvailable: kB\n"));
  CHECK(!cq::parse_mem_available("MemAvailable: 5 MB\n"));
  CHECK(!cq::parse_mem_available("MemAvailable: 18446744073709551616 kB\n"));  // past 2^64 - 1 before the unit
  CHECK(!cq::parse_mem_available("MemAvailable: 18014398509481984 kB\n"));     // 2^54 kB: 2^64 bytes
  CHECK(!cq::parse_mem_available(""));
}

TEST_CASE("available_memory: MemAvailable now, the physical memory where /proc/meminfo cannot be read") {
  const auto now = cq::available_memory();
  if (std::filesystem::exists("/proc/meminfo")) CHECK(now.available_now);
  CHECK(now.bytes > (std::size_t{1} << 20));
  CHECK(now.bytes <= cq::physical_memory_bytes());
  const auto fallback = cq::available_memory("/nonexistent/meminfo");
  CHECK(!fallback.available_now);
  CHECK(fallback.bytes == cq::physical_memory_bytes());
  TempFile without_key("MemTotal: 1024 kB\n");
  CHECK(!cq::available_memory(without_key.path.c_str()).available_now);
  TempFile with_key("MemTotal: 4096 kB\nMemAvailable: 1024 kB\n");
  const auto read = cq::available_memory(with_key.path.c_str());
  CHECK(read.available_now);
  CHECK(read.bytes == std::size_t{1} << 20);
}

TEST_CASE("require_memory refuses more bytes than are available now, naming what, the bytes needed and available") {
  CHECK_NOTHROW(cq::require_memory(1 << 20, "a small buffer"));
  // above the physical memory: refused whatever MemAvailable says this instant
  const std::size_t physical = cq::physical_memory_bytes();
  REQUIRE(physical > (std::size_t{1} << 20));
  const auto m = cqtest::error_message<cq::SizeError>([&] { cq::require_memory(physical + 1, "the KV cache"); });
  CHECK(m.find(fmt::format("the KV cache needs {} ({} bytes), more than the ", cq::readable_bytes(double(physical + 1)),
                           physical + 1)) == 0);
  const bool now = cq::available_memory().available_now;
  CHECK(m.find(now ? " bytes) of memory available now" : " bytes) of this machine's physical memory") != std::string::npos);
  // against a given figure: below the physical memory but above what is available now
  const cq::AvailableMemory one_mib{std::size_t{1} << 20, true};
  CHECK_NOTHROW(cq::require_memory(std::size_t{1} << 20, "a batch", one_mib));
  CHECK(cqtest::error_message<cq::SizeError>([&] { cq::require_memory((std::size_t{1} << 20) + 1, "a batch", one_mib); }) ==
        "a batch needs 1.0 MiB (1048577 bytes), more than the 1.0 MiB (1048576 bytes) of memory available now");
  CHECK(cqtest::error_message<cq::SizeError>([&] { cq::require_memory(std::size_t{3} << 30, "a batch", {std::size_t{1} << 30, false}); }) ==
        "a batch needs 3.0 GiB (3221225472 bytes), more than the 1.0 GiB (1073741824 bytes) of this machine's physical memory");
  CHECK(cq::readable_bytes(512) == "512 bytes");
  CHECK(cq::readable_bytes(3.0 * 1024 * 1024) == "3.0 MiB");
  CHECK(cq::readable_bytes(static_cast<double>(max_size)) == "16.0 EiB");
}

TEST_CASE("allocating turns std::bad_alloc into a SizeError naming what and how much") {
  CHECK(cq::allocating("x", 8, [] { return 7; }) == 7);
  const auto m = cqtest::error_message<cq::SizeError>([] {
    cq::allocating("the evaluation's batches", std::size_t{3} << 30, []() -> int { throw std::bad_alloc(); });
  });
  CHECK(m == "the evaluation's batches: cannot allocate 3.0 GiB (3221225472 bytes)");
}

TEST_CASE("LineReader: lines with and without '\\r' and a final '\\n'; blank lines kept") {
  TempFile f("one\r\ntwo\n\nthree");
  cq::LineReader in(f.path);
  CHECK(all_lines(in) == std::vector<std::string>{"one", "two", "", "three"});
  CHECK(in.line_number() == 4);
  TempFile empty("");
  cq::LineReader none(empty.path);
  std::string line;
  CHECK_FALSE(none.next(line));
  CHECK(none.line_number() == 0);
}

TEST_CASE("LineReader: a line past the limit is refused with the file and its line number") {
  // lines across the 64 KiB buffer: the limit holds whatever the buffer's boundaries
  const std::string long_line(70000, 'x');
  TempFile f("short\n" + long_line + "\n" + "after\n");
  {
    cq::LineReader in(f.path, 70000);
    CHECK(all_lines(in) == std::vector<std::string>{"short", long_line, "after"});
  }
  cq::LineReader in(f.path, 69999);
  std::string line;
  CHECK(in.next(line));
  const auto m = cqtest::error_message<cq::FormatError>([&] { in.next(line); });
  CHECK(m == f.path.string() + ":2: the line is longer than 69999 bytes, the limit of a line");
  CHECK(line.size() <= 69999);
  CHECK(cq::default_max_line_bytes == std::size_t{64} << 20);
}

TEST_CASE("LineReader: /dev/zero is one endless line, refused at the limit (not read to the end)") {
  if (!std::filesystem::exists("/dev/zero")) return;
  cq::LineReader in("/dev/zero", 1 << 20);
  std::string line;
  CHECK(cqtest::error_message<cq::FormatError>([&] { in.next(line); }) ==
        "/dev/zero:1: the line is longer than 1 MiB, the limit of a line");
}

TEST_CASE("LineReader: a read error is an error, not the end of the input") {
  // reading a directory fails with EISDIR
  const auto dir = std::filesystem::temp_directory_path();
  cq::LineReader in(dir);
  std::string line;
  const auto m = cqtest::error_message<cq::FormatError>([&] { in.next(line); });
  CHECK(m.find(dir.string() + ": read error after line 0: ") == 0);
  const auto missing = cqtest::error_message<cq::FormatError>([] { cq::LineReader("/nonexistent/cq.jsonl"); });
  CHECK(missing == "/nonexistent/cq.jsonl: cannot open the file: No such file or directory");
}

TEST_CASE("json::escaped writes control bytes and invalid UTF-8 as \\xHH, keeps valid UTF-8") {
  CHECK(cq::json::escaped("plain") == "plain");
  CHECK(cq::json::escaped("caf\xc3\xa9 \xe4\xb8\xad") == "caf\xc3\xa9 \xe4\xb8\xad");
  CHECK(cq::json::escaped(std::string("a\xff" "b\x01" "c", 5)) == "a\\xffb\\x01c");
  CHECK(cq::json::escaped("\xc3") == "\\xc3");              // a cut sequence
  CHECK(cq::json::escaped("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  const auto m = cqtest::error_message<cq::FormatError>([] { cq::json::parse("[\"\xff\"]", "f.json"); });
  CHECK(m.find("f.json: not valid JSON") == 0);
  CHECK(m.find('\xff') == std::string::npos);
}

TEST_CASE("json::parse_file refuses a file past 256 MiB after reading that much (/dev/zero)") {
  if (!std::filesystem::exists("/dev/zero")) return;
  CHECK(cqtest::error_message<cq::FormatError>([] { cq::json::parse_file("/dev/zero"); }) ==
        "/dev/zero: holds more than 256 MiB, the limit of a JSON file");
  TempFile small("{\"a\": 1}");
  CHECK(cq::json::parse_file(small.path)["a"] == 1);
}
