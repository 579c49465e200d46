// Agreement with an independent implementation (tests/reference/safetensors_reference.py: the
// format written and read with Python's struct and json, values and float16/bfloat16 rounding
// from PyTorch). Its ctest fixture writes the files read here; this test writes
// from_cpp.safetensors, which the ctest format_reference_check then reads back in Python.
#include <causalqwen/format.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifndef CQ_FORMAT_REFERENCE_DIR
#error "CQ_FORMAT_REFERENCE_DIR must name the directory the reference fixture writes"
#endif

namespace format = causalqwen::format;

namespace {
const std::filesystem::path reference_dir = CQ_FORMAT_REFERENCE_DIR;

nlohmann::json load_expected() {
  std::ifstream in(reference_dir / "expected.json");
  REQUIRE_MESSAGE(in.good(), "run the ctest fixture format_reference_files first");
  return nlohmann::json::parse(in);
}

double json_value(const nlohmann::json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? std::numeric_limits<double>::infinity()
                      : -std::numeric_limits<double>::infinity();
  }
  return v.get<double>();
}

bool same_value(double a, double b) {
  if (std::isnan(b)) return std::isnan(a);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Every tensor of `expected` (name → {dtype, shape, values}) as `source` reads it.
template <class Source>
void check_tensors(const Source& source, const nlohmann::json& expected) {
  CHECK(source.size() == expected.size());
  for (const auto& [name, e] : expected.items()) {
    CAPTURE(name);
    const format::TensorInfo& info = source.info(name);
    CHECK(format::dtype_name(info.dtype) == e["dtype"].template get<std::string>());
    CHECK(info.shape == e["shape"].template get<std::vector<std::size_t>>());
    const auto& values = e["values"];
    if (format::is_floating(info.dtype)) {
      const auto as_double = source.template read_vector<double>(name);
      const auto as_float = source.template read_vector<float>(name);
      REQUIRE(as_double.size() == values.size());
      int mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double expected_value = json_value(values[i]);
        mismatches += !same_value(as_double[i], expected_value);
        mismatches += !same_value(as_float[i], static_cast<float>(expected_value));
      }
      CHECK(mismatches == 0);
    } else {
      CHECK(source.read_int64_vector(name) == values.template get<std::vector<std::int64_t>>());
    }
  }
}
}  // namespace

TEST_CASE("a file written by the independent implementation: every dtype and special value") {
  const auto expected = load_expected();
  for (auto mode : {format::LoadMode::automatic, format::LoadMode::read}) {
    const auto file = format::SafetensorsFile::open(reference_dir / "reference.safetensors", mode);
    check_tensors(file, expected["reference"]);
    CHECK(file.metadata() == expected["metadata"].get<std::map<std::string, std::string>>());
  }
}

TEST_CASE("a sharded checkpoint written by the independent implementation") {
  const auto expected = load_expected();
  const auto ckpt = format::SafetensorsCheckpoint::open(reference_dir / "sharded");
  CHECK(ckpt.is_sharded());
  check_tensors(ckpt, expected["sharded"]);
  for (const auto& [name, e] : expected["sharded"].items())
    CHECK(ckpt.file_of(name).path().filename() == e["shard"].get<std::string>());
}

TEST_CASE("a file for the independent implementation to check (format_reference_check)") {
  // float32 sources whose bfloat16 and binary16 roundings PyTorch recomputes: exact ties,
  // subnormals, overflow, specials, and random patterns in and around the binary16 range.
  std::vector<float> source = {
      0.0f, -0.0f, 1.0f, -2.5f, 1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
      std::ldexp(1.0f, -25), std::ldexp(3.0f, -25), std::ldexp(1.0f, -24), 65504.0f, 65519.0f,
      65520.0f, 1e6f, std::ldexp(1023.5f, -24), std::bit_cast<float>(0x3F808000u),
      std::bit_cast<float>(0x3F818000u), std::bit_cast<float>(0x00000001u), 1e-40f,
      std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(static_cast<std::uint32_t>(cqtest::test_seed(777, "from_cpp.safetensors")));
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_int_distribution<int> exponent(-30, 17);
  for (int i = 0; i < 4000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    int e = 0;
    source.push_back(i % 2 ? x : std::ldexp(std::frexp(x, &e), exponent(rng)));
  }
  std::vector<double> f64(12);
  for (std::size_t i = 0; i < f64.size(); ++i) f64[i] = static_cast<double>(i) / 8;
  const std::vector<std::int64_t> ids = {-(std::int64_t{1} << 40), 0, 7};

  format::SafetensorsWriter writer;
  writer.add("source.f32", {source.size()}, source)
      .add("source.bf16", {source.size()}, source, format::Dtype::BF16)
      .add("source.f16", {source.size()}, source, format::Dtype::F16)
      .add("source.f64", {3, 4}, f64)
      .add("ids.i64", {3}, ids)
      .set_metadata("producer", "causalqwen")
      .set_metadata("purpose", "python check");
  writer.write(reference_dir / "from_cpp.safetensors");
  CHECK(format::SafetensorsFile::open(reference_dir / "from_cpp.safetensors").size() == 5);
}
