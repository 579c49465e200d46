// Writing and reading safetensors files: round trips for every dtype, the exact layout the
// Python library writes (order, offsets, padding, metadata), conversions on reading, the read
// fallback when mapping is not used, and the checks on the caller's side (sizes, shapes, kinds).
#include <causalqwen/format.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "io_test_support.hpp"

#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace cq = causalqwen;
namespace format = causalqwen::format;
using cq::DomainError;
using cq::FormatError;
using cqtest::error_message;

namespace {
const std::vector<float> float_values = {0.0f, -0.0f, 1.0f, -2.5f, 3.14159265f, 1e-3f, 65504.0f,
                                         std::ldexp(1.0f, -24), 1e-40f,
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(),
                                         std::numeric_limits<float>::quiet_NaN()};

bool same_value(double a, double b) {
  if (std::isnan(b)) return std::isnan(a);
  return a == b && std::signbit(a) == std::signbit(b);
}
}  // namespace

TEST_CASE("round trip of every writable dtype, mapped and read") {
  iotest::TempDir dir;
  const std::vector<double> doubles = {1.0 / 3.0, -1e300, 5e-324, 0.0, 42.0, -0.0};
  const std::vector<std::int64_t> ints = {-(std::int64_t{1} << 62), -1, 0, 1, std::int64_t{1} << 40, 7};
  const std::vector<std::int64_t> small_ints = {-(std::int64_t{1} << 31), 0, (std::int64_t{1} << 31) - 1};
  std::vector<std::byte> raw_u8 = {std::byte{0}, std::byte{200}, std::byte{255}};
  std::vector<std::byte> raw_i8 = {std::byte{0x80}, std::byte{0x05}, std::byte{0x7F}};
  std::vector<std::byte> raw_i16(4);
  const std::int16_t i16[2] = {-32768, 1234};
  std::memcpy(raw_i16.data(), i16, 4);
  std::vector<std::byte> raw_bool = {std::byte{1}, std::byte{0}, std::byte{1}};

  format::SafetensorsWriter writer;
  writer.add("f32", {3, 4}, float_values)
      .add("f64_from_float", {12}, float_values, format::Dtype::F64)
      .add("bf16", {2, 6}, float_values, format::Dtype::BF16)
      .add("f16", {12}, float_values, format::Dtype::F16)
      .add("f64", {2, 3}, doubles)
      .add("f32_from_double", {6}, doubles, format::Dtype::F32)
      .add("i64", {6}, ints)
      .add("i32", {3}, small_ints, format::Dtype::I32)
      .add_bytes("u8", format::Dtype::U8, {3}, raw_u8)
      .add_bytes("i8", format::Dtype::I8, {3}, raw_i8)
      .add_bytes("i16", format::Dtype::I16, {2}, raw_i16)
      .add_bytes("bool", format::Dtype::BOOL, {3}, raw_bool)
      .add("scalar", {}, std::span<const float>(float_values).first(1))
      .add("empty", {0, 5}, std::span<const float>())
      .set_metadata("format", "pt")
      .set_metadata("note", "quotes \" and unicode é");
  const auto path = dir / "all.safetensors";
  writer.write(path);

  for (auto mode : {format::LoadMode::automatic, format::LoadMode::read}) {
    CAPTURE(static_cast<int>(mode));
    const auto file = format::SafetensorsFile::open(path, mode);
    CHECK(file.is_mapped() == (mode == format::LoadMode::automatic));
    CHECK(file.names() == std::vector<std::string>{"bf16", "bool", "empty", "f16", "f32",
                                                   "f32_from_double", "f64", "f64_from_float",
                                                   "i16", "i32", "i64", "i8", "scalar", "u8"});
    CHECK(file.metadata().at("note") == "quotes \" and unicode é");
    CHECK(file.metadata().at("format") == "pt");

    CHECK(file.info("f32").shape == std::vector<std::size_t>{3, 4});
    CHECK(file.info("f32").dtype == format::Dtype::F32);
    CHECK(file.info("bf16").dtype == format::Dtype::BF16);
    CHECK(file.info("bf16").byte_size() == 24);
    const auto f32 = file.read_vector<float>("f32");
    const auto f64_from_float = file.read_vector<double>("f64_from_float");
    const auto bf16 = file.read_vector<float>("bf16");
    const auto f16 = file.read_vector<double>("f16");
    for (std::size_t i = 0; i < float_values.size(); ++i) {
      CAPTURE(i);
      CHECK(same_value(f32[i], float_values[i]));
      CHECK(same_value(f64_from_float[i], float_values[i]));
      CHECK(same_value(bf16[i], cq::bf16_to_float(cq::float_to_bf16(float_values[i]))));
      CHECK(same_value(f16[i], format::f16_to_float(format::float_to_f16(float_values[i]))));
    }
    CHECK(bf16[4] == 3.140625f);  // 3.14159265 to 8 significant bits
    CHECK(f16[6] == 65504.0);
    CHECK(f16[7] == std::ldexp(1.0, -24));  // the smallest f16 subnormal survives
    const auto f64 = file.read_vector<double>("f64");
    for (std::size_t i = 0; i < doubles.size(); ++i) CHECK(same_value(f64[i], doubles[i]));
    const auto f32_from_double = file.read_vector<double>("f32_from_double");
    CHECK(f32_from_double[0] == static_cast<double>(1.0f / 3.0f));
    CHECK(f32_from_double[1] == -std::numeric_limits<double>::infinity());  // -1e300 overflows F32
    CHECK(file.read_vector<float>("f64")[0] == 1.0f / 3.0f);  // F64 → float rounds
    CHECK(file.read_int64_vector("i64") == ints);
    CHECK(file.read_int64_vector("i32") == small_ints);
    CHECK(file.read_int64_vector("u8") == std::vector<std::int64_t>{0, 200, 255});
    CHECK(file.read_int64_vector("i8") == std::vector<std::int64_t>{-128, 5, 127});
    CHECK(file.read_int64_vector("i16") == std::vector<std::int64_t>{-32768, 1234});
    CHECK(file.read_int64_vector("bool") == std::vector<std::int64_t>{1, 0, 1});
    CHECK(file.read_vector<float>("scalar") == std::vector<float>{0.0f});
    CHECK(file.info("scalar").shape.empty());
    CHECK(file.read_vector<float>("empty").empty());
    CHECK(file.info("empty").shape == std::vector<std::size_t>{0, 5});
  }
}

TEST_CASE("the writer lays the file out as the Python library does") {
  iotest::TempDir dir;
  const std::vector<float> two = {1.0f, 2.0f};
  const std::vector<double> one = {0.5};
  const std::vector<std::int64_t> ids = {3};
  format::SafetensorsWriter writer;
  // Added in an order unlike the file's: the file orders by descending dtype, then by name.
  writer.add("b", {2}, two, format::Dtype::F16)
      .add("a", {1, 2}, two)
      .add("z", {1}, one)
      .add("ids", {1}, ids)
      .add("c", {2}, two, format::Dtype::BF16)
      .set_metadata("k", "v");
  const std::string expected_json =
      R"({"__metadata__":{"k":"v"},"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("z":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[16,24]},)"
      R"("c":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},)"
      R"("b":{"dtype":"F16","shape":[2],"data_offsets":[28,32]}})";
  const std::string header = writer.header();
  REQUIRE(header.size() >= 8);
  std::uint64_t n = 0;
  std::memcpy(&n, header.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(n == header.size() - 8);
  CHECK(header.substr(8, expected_json.size()) == expected_json);
  CHECK(header.substr(8 + expected_json.size()) == std::string(n - expected_json.size(), ' '));
  CHECK(n - expected_json.size() < 8);

  const auto path = dir / "layout.safetensors";
  writer.write(path);
  const std::string bytes = iotest::read_bytes(path);
  CHECK(bytes.size() == 8 + n + 32);
  CHECK(bytes.substr(0, 8 + n) == header);
  std::int64_t id = 0;
  std::memcpy(&id, bytes.data() + 8 + n, 8);
  CHECK(id == 3);
  std::uint16_t f16_bits[2];
  std::memcpy(f16_bits, bytes.data() + 8 + n + 28, 4);
  CHECK(f16_bits[0] == 0x3C00);
  CHECK(f16_bits[1] == 0x4000);
}

TEST_CASE("a file without metadata has no __metadata__ entry") {
  iotest::TempDir dir;
  const std::vector<float> v = {1.0f};
  format::SafetensorsWriter writer;
  writer.add("x", {1}, v);
  CHECK(writer.header().find("__metadata__") == std::string::npos);
  writer.write(dir / "x.safetensors");
  CHECK(format::SafetensorsFile::open(dir / "x.safetensors").metadata().empty());
}

TEST_CASE("the writer refuses inconsistent tensors") {
  const std::vector<float> three = {1, 2, 3};
  const std::vector<double> d = {1};
  const std::vector<std::int64_t> big = {std::int64_t{1} << 40};
  format::SafetensorsWriter writer;
  writer.add("x", {3}, three);
  CHECK(error_message<DomainError>([&] { writer.add("x", {3}, three); }) ==
        "causalqwen::SafetensorsWriter::add: tensor 'x' added twice");
  CHECK(error_message<DomainError>([&] { writer.add("y", {2, 2}, three); }) ==
        "causalqwen::SafetensorsWriter::add: tensor 'y': shape [2,2] has 4 elements, the data 3");
  CHECK(error_message<DomainError>([&] { writer.add("__metadata__", {3}, three); })
            .find("reserved") != std::string::npos);
  CHECK(error_message<DomainError>([&] { writer.add("", {3}, three); })
            .find("must not be empty") != std::string::npos);
  CHECK(error_message<DomainError>([&] { writer.add("d", {1}, d, format::Dtype::BF16); }) ==
        "causalqwen::SafetensorsWriter::add: tensor 'd': double data can be stored as F64 or "
        "F32, not BF16");
  CHECK(error_message<DomainError>([&] { writer.add("f", {3}, three, format::Dtype::I64); })
            .find("float data can be stored as F32, F64, BF16 or F16, not I64") != std::string::npos);
  CHECK(error_message<DomainError>([&] { writer.add("i", {1}, big, format::Dtype::I32); }) ==
        "causalqwen::SafetensorsWriter::add: tensor 'i': value 1099511627776 does not fit I32");
  CHECK(writer.size() == 1);
}

TEST_CASE("reading checks the tensor's name, kind, size and shape") {
  iotest::TempDir dir;
  const std::vector<float> six = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int64_t> ids = {1, 2};
  format::SafetensorsWriter writer;
  writer.add("w", {2, 3}, six).add("ids", {2}, ids);
  const auto path = dir / "m.safetensors";
  writer.write(path);
  const auto file = format::SafetensorsFile::open(path);

  CHECK(error_message<FormatError>([&] { file.info("x"); }) ==
        "tensor 'x' not found in " + path.string());
  std::vector<float> out(6);
  CHECK(error_message<FormatError>([&] { file.read("x", std::span<float>(out)); }) ==
        "tensor 'x' not found in " + path.string());
  std::vector<float> wrong(5);
  CHECK(error_message<DomainError>([&] { file.read("w", std::span<float>(wrong)); }) ==
        "causalqwen::SafetensorsFile::read: tensor 'w' in " + path.string() +
            " has 6 elements (shape [2,3]), the output 5");
  const std::vector<std::size_t> expected_shape = {3, 2};
  CHECK(error_message<FormatError>([&] { file.read("w", expected_shape, std::span<float>(out)); }) ==
        path.string() + ": tensor 'w' has shape [2,3], expected [3,2]");
  const std::vector<std::size_t> right_shape = {2, 3};
  file.read("w", right_shape, std::span<float>(out));
  CHECK(out == six);
  std::vector<std::int64_t> int_out(6);
  CHECK(error_message<FormatError>([&] { file.read_int64("w", int_out); }) ==
        path.string() + ": tensor 'w' has dtype F32, expected an integer dtype (I64, I32, I16, "
                        "I8, U8 or BOOL)");
  CHECK(error_message<FormatError>([&] { file.read_vector<double>("ids"); }) ==
        path.string() + ": tensor 'ids' has dtype I64, expected a floating dtype (F32, F64, "
                        "BF16 or F16)");
  CHECK(file.raw("ids").size() == 16);
}

TEST_CASE("tensors with unaligned data are read correctly") {
  // A hand-made file whose header length (5) leaves the data at byte 13: every element is
  // misaligned, which the reader must handle (it copies bytes, never dereferences casts).
  iotest::TempDir dir;
  const std::string header = R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F16","shape":[1],"data_offsets":[16,18]}})";
  std::string data(18, '\0');
  const double values[2] = {1.5, -7.25};
  std::memcpy(data.data(), values, 16);
  const std::uint16_t half_two = 0x4000;
  std::memcpy(data.data() + 16, &half_two, 2);
  const auto path = dir / "unaligned.safetensors";
  iotest::write_bytes(path, iotest::safetensors_bytes(header + "   ", data));  // 3 spaces
  const auto file = format::SafetensorsFile::open(path);
  CHECK(reinterpret_cast<std::uintptr_t>(file.raw("a").data()) % 8 != 0);
  CHECK(file.read_vector<double>("a") == std::vector<double>{1.5, -7.25});
  CHECK(file.read_vector<float>("a") == std::vector<float>{1.5f, -7.25f});
  CHECK(file.read_vector<float>("b") == std::vector<float>{2.0f});
}

TEST_CASE("a file of tens of megabytes round-trips through the chunked writer") {
  iotest::TempDir dir;
  std::vector<float> big(5'000'000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  format::SafetensorsWriter writer;
  writer.add("big", {5000, 1000}, big).add("big_bf16", {5'000'000}, big, format::Dtype::BF16);
  writer.write(dir / "big.safetensors");
  const auto file = format::SafetensorsFile::open(dir / "big.safetensors");
  CHECK(file.read_vector<float>("big") == big);
  const auto bf16 = file.read_vector<float>("big_bf16");
  bool all_equal = true;
  for (std::size_t i = 0; i < big.size(); i += 997)
    all_equal &= bf16[i] == cq::bf16_to_float(cq::float_to_bf16(big[i]));
  CHECK(all_equal);
  CHECK(bf16[4'999'999] == cq::bf16_to_float(cq::float_to_bf16(big[4'999'999])));
}

TEST_CASE("a file that cannot be mapped (a pipe) is read instead") {
  iotest::TempDir dir;
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  format::SafetensorsWriter writer;
  writer.add("v", {3}, values).set_metadata("via", "pipe");
  writer.write(dir / "plain.safetensors");
  const std::string bytes = iotest::read_bytes(dir / "plain.safetensors");
  const auto fifo = dir / "pipe.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread feeder([&] { iotest::write_bytes(fifo, bytes); });
  const auto file = format::SafetensorsFile::open(fifo);  // automatic mode: mmap refused → read
  feeder.join();
  CHECK_FALSE(file.is_mapped());
  CHECK(file.metadata().at("via") == "pipe");
  CHECK(file.read_vector<float>("v") == values);
}
