// Every way a safetensors file can be damaged gives a FormatError that names the file and what
// is wrong: each case is a file the test writes into a temporary directory.
#include <causalqwen/format.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "io_test_support.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace format = causalqwen::format;
using cq::FormatError;

namespace {
// The FormatError message of opening a file made of `bytes`, with the file's path replaced by
// "FILE" so the expectations read as the messages do.
std::string open_error(const std::string& bytes) {
  iotest::TempDir dir;
  const auto path = dir / "bad.safetensors";
  iotest::write_bytes(path, bytes);
  std::string message = cqtest::error_message<FormatError>([&] { format::SafetensorsFile::open(path); });
  const std::string p = path.string();
  for (auto at = message.find(p); at != std::string::npos; at = message.find(p))
    message.replace(at, p.size(), "FILE");
  return message;
}

// A file whose header is `header` and whose data section is `data_bytes` zero bytes.
std::string header_error(const std::string& header, std::size_t data_bytes = 16) {
  return open_error(iotest::safetensors_bytes(header, std::string(data_bytes, '\0')));
}

std::string entry(const std::string& fields) { return R"({"t":{)" + fields + "}}"; }
}  // namespace

TEST_CASE("a file shorter than the 8-byte header length") {
  CHECK(open_error("") ==
        "FILE: file is 0 bytes, shorter than the 8-byte header length of a safetensors file");
  CHECK(open_error("abcde") ==
        "FILE: file is 5 bytes, shorter than the 8-byte header length of a safetensors file");
}

TEST_CASE("a header length larger than the file") {
  CHECK(open_error(iotest::length_prefixed("{}", 100)) ==
        "FILE: header length 100 is larger than the 2 bytes that follow it (file of 10 bytes)");
  CHECK(open_error(iotest::length_prefixed("{}", UINT64_MAX)).find(
            "header length 18446744073709551615 is larger than the 2 bytes") != std::string::npos);
}

TEST_CASE("a malformed JSON header reports the parser's message") {
  const std::string message = header_error(R"({"t": {"dtype": "F32",)");
  CHECK(message.rfind("FILE: JSON header malformed: [json.exception.parse_error.101]", 0) == 0);
  CHECK(header_error("[1, 2]") == "FILE: JSON header is a array, expected an object");
  CHECK(header_error("\"text\"") == "FILE: JSON header is a string, expected an object");
}

TEST_CASE("an entry missing dtype, shape or data_offsets") {
  CHECK(header_error(entry(R"("shape":[2],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': missing field 'dtype'");
  CHECK(header_error(entry(R"("dtype":"F32","data_offsets":[0,8])")) ==
        "FILE: tensor 't': missing field 'shape'");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2])")) ==
        "FILE: tensor 't': missing field 'data_offsets'");
  CHECK(header_error(R"({"t":5})") ==
        "FILE: tensor 't': entry is a number, expected an object with dtype, shape and "
        "data_offsets");
}

TEST_CASE("entries with fields of the wrong JSON type") {
  CHECK(header_error(entry(R"("dtype":32,"shape":[2],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': dtype is a number, expected a string");
  CHECK(header_error(entry(R"("dtype":"F32","shape":"2","data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape is a string, expected an array of non-negative integers");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2.5],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape entry 2.5 is a number, expected a non-negative integer");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0])")) ==
        "FILE: tensor 't': data_offsets is [0], expected an array [begin, end]");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":{"a":1})")) ==
        "FILE: tensor 't': data_offsets is {\"a\":1}, expected an array [begin, end]");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,"8"])")) ==
        "FILE: tensor 't': data_offsets entry \"8\" is a string, expected a non-negative integer");
}

TEST_CASE("an unknown dtype") {
  CHECK(header_error(entry(R"("dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2])")) ==
        "FILE: tensor 't': unknown dtype 'F8_E4M3' (known: F64, F32, BF16, F16, I64, I32, I16, "
        "I8, U8, BOOL)");
}

TEST_CASE("data offsets out of range or reversed") {
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":[8,16])"), 12) ==
        "FILE: tensor 't': data_offsets [8,16] extend past the data section (12 bytes)");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[0],"data_offsets":[8,4])")) ==
        "FILE: tensor 't': data_offsets [8,4] begin after they end");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])")) ==
        "FILE: tensor 't': data_offsets entry -8 is negative");
}

TEST_CASE("a truncated file (the data cut short)") {
  iotest::TempDir dir;
  const std::vector<float> values(100, 1.0f);
  format::SafetensorsWriter writer;
  writer.add("w", {10, 10}, values);
  const auto path = dir / "model.safetensors";
  writer.write(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  const std::string message =
      cqtest::error_message<FormatError>([&] { format::SafetensorsFile::open(path); });
  CHECK(message == path.string() +
                       ": tensor 'w': data_offsets [0,400] extend past the data section (390 bytes)");
}

TEST_CASE("two tensors whose bytes overlap") {
  CHECK(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})") ==
        "FILE: tensors 'a' (bytes [0,8)) and 'b' (bytes [4,12)) overlap");
  // Empty tensors occupy no bytes and overlap nothing.
  CHECK(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})") ==
        "no exception");
}

TEST_CASE("a byte count that is not product(shape) times the dtype size") {
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,16])")) ==
        "FILE: tensor 't': data_offsets [0,16] hold 16 bytes, but shape [2,3] of F32 needs 24");
  CHECK(header_error(entry(R"("dtype":"BF16","shape":[4],"data_offsets":[0,16])")) ==
        "FILE: tensor 't': data_offsets [0,16] hold 16 bytes, but shape [4] of BF16 needs 8");
}

TEST_CASE("a shape with a negative or overflowing entry") {
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2,-3],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape entry -3 is negative");
  CHECK(header_error(entry(
            R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape [4294967296,4294967296] overflows the element count");
  CHECK(header_error(entry(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape [4611686018427387904] overflows the byte count");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[1e30],"data_offsets":[0,8])")) ==
        "FILE: tensor 't': shape entry 1e+30 is a number, expected a non-negative integer");
}

TEST_CASE("duplicated names and keys") {
  CHECK(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})") ==
        "FILE: the header names 'a' twice");
  CHECK(header_error(entry(R"("dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8])")) ==
        "FILE: key 'dtype' appears twice in the entry of 't'");
}

TEST_CASE("metadata that is not an object of strings") {
  CHECK(header_error(R"({"__metadata__":[1]})") ==
        "FILE: __metadata__ is a array, expected an object of strings");
  CHECK(header_error(R"({"__metadata__":{"step":10}})") ==
        "FILE: __metadata__ value of 'step' is a number, expected a string");
}

TEST_CASE("a path that is missing or a directory") {
  iotest::TempDir dir;
  const auto missing = dir / "none.safetensors";
  CHECK(cqtest::error_message<FormatError>([&] { format::SafetensorsFile::open(missing); }) ==
        missing.string() + ": cannot open: No such file or directory");
  CHECK(cqtest::error_message<FormatError>([&] { format::SafetensorsFile::open(dir.path()); }) ==
        dir.path().string() + ": cannot open: Is a directory");
}

TEST_CASE("a valid hand-made header passes (the cases above fail for their one reason)") {
  CHECK(header_error(R"({"__metadata__":{"a":"b"},)"
                     R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("u":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})") ==
        "no exception");
  CHECK(header_error(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])")) ==
        "no exception");
}
