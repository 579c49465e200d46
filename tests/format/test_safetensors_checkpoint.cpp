// Checkpoint directories (one file or indexed shards), the expected-tensor check, and atomic
// writes (no temporary left behind; an existing file replaced only by a complete new one).
#include <causalqwen/format.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "io_test_support.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace format = causalqwen::format;
using cq::FormatError;
using cqtest::error_message;

namespace {
std::vector<std::string> directory_listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const std::vector<float> embed = {1, 2, 3, 4, 5, 6};
const std::vector<float> norm = {0.5f, 0.25f, 0.125f};
const std::vector<double> head = {1.0 / 3, 2.0 / 3};

// Two shards and their index in `dir`.
void write_sharded(const std::filesystem::path& dir, const std::string& index_json = "") {
  format::SafetensorsWriter first, second;
  first.add("model.embed_tokens.weight", {2, 3}, embed, format::Dtype::BF16).set_metadata("format", "pt");
  second.add("model.norm.weight", {3}, norm).add("causal.head", {2}, head);
  first.write(dir / "model-00001-of-00002.safetensors");
  second.write(dir / "model-00002-of-00002.safetensors");
  iotest::write_bytes(dir / "model.safetensors.index.json",
                      index_json.empty() ? R"({"metadata": {"total_size": 40}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors",
    "causal.head": "model-00002-of-00002.safetensors"}})"
                                         : index_json);
}
}  // namespace

TEST_CASE("a sharded checkpoint reads as one namespace") {
  iotest::TempDir dir;
  write_sharded(dir.path());
  const auto ckpt = format::SafetensorsCheckpoint::open(dir.path());
  CHECK(ckpt.is_sharded());
  CHECK(ckpt.files().size() == 2);
  CHECK(ckpt.names() == std::vector<std::string>{"causal.head", "model.embed_tokens.weight",
                                                 "model.norm.weight"});
  CHECK(ckpt.read_vector<float>("model.embed_tokens.weight") == embed);  // BF16-exact integers
  CHECK(ckpt.read_vector<float>("model.norm.weight") == norm);
  CHECK(ckpt.read_vector<double>("causal.head") == head);
  CHECK(ckpt.info("model.norm.weight").shape == std::vector<std::size_t>{3});
  CHECK(ckpt.file_of("causal.head").path().filename() == "model-00002-of-00002.safetensors");
  CHECK(ckpt.metadata().at("format") == "pt");
  CHECK(error_message<FormatError>([&] { ckpt.read_vector<float>("lm_head.weight"); }) ==
        "tensor 'lm_head.weight' not found in " + dir.path().string());
}

TEST_CASE("model.safetensors is preferred to an index") {
  iotest::TempDir dir;
  write_sharded(dir.path());
  format::SafetensorsWriter single;
  single.add("only", {3}, norm);
  single.write(dir / "model.safetensors");
  const auto ckpt = format::SafetensorsCheckpoint::open(dir.path());
  CHECK_FALSE(ckpt.is_sharded());
  CHECK(ckpt.names() == std::vector<std::string>{"only"});
  CHECK(ckpt.read_vector<float>("only") == norm);
}

TEST_CASE("bad checkpoint directories and indexes") {
  iotest::TempDir dir;
  const auto index = (dir / "model.safetensors.index.json").string();
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        dir.path().string() +
            ": no checkpoint: neither model.safetensors nor model.safetensors.index.json exists");

  write_sharded(dir.path(), R"({"weight_map": {"a": )");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); })
            .rfind(index + ": not valid JSON ([json.exception.parse_error", 0) == 0);

  write_sharded(dir.path(), R"({"metadata": {}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        index + ": expected an object with a \"weight_map\" object (tensor name → shard file)");

  write_sharded(dir.path(), R"({"weight_map": {"a": 3}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        index + ": weight_map entry of 'a' is a number, expected a file name");

  write_sharded(dir.path(), R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        index + ": weight_map entry of 'a' is '../elsewhere.safetensors', expected a file name "
                "in the checkpoint directory");

  write_sharded(dir.path(), R"({"weight_map": {}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        index + ": weight_map is empty");

  write_sharded(dir.path(), R"({"weight_map": {"a": "model-00003-of-00003.safetensors"}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        (dir / "model-00003-of-00003.safetensors").string() +
            ": cannot open: No such file or directory");

  write_sharded(dir.path(), R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        index + ": weight_map places tensor 'model.norm.weight' in "
                "model-00001-of-00002.safetensors, which does not hold it");

  // A damaged shard is reported with the shard's own name.
  write_sharded(dir.path());
  iotest::write_bytes(dir / "model-00002-of-00002.safetensors", "short");
  CHECK(error_message<FormatError>([&] { format::SafetensorsCheckpoint::open(dir.path()); }) ==
        (dir / "model-00002-of-00002.safetensors").string() +
            ": file is 5 bytes, shorter than the 8-byte header length of a safetensors file");
}

TEST_CASE("check_expected reports missing, extra and wrongly-shaped tensors at once") {
  iotest::TempDir dir;
  write_sharded(dir.path());
  const auto ckpt = format::SafetensorsCheckpoint::open(dir.path());
  const std::vector<format::ExpectedTensor> all_right = {
      {"model.embed_tokens.weight", {2, 3}}, {"model.norm.weight", {3}}, {"causal.head", {2}}};
  CHECK(error_message<FormatError>([&] { format::check_expected(ckpt, all_right); }) == "no exception");

  const std::vector<format::ExpectedTensor> expected = {{"model.embed_tokens.weight", {3, 2}},
                                                    {"model.norm.weight", {3}},
                                                    {"lm_head.weight", {2, 3}},
                                                    {"causal.action.b_noise", {4}}};
  CHECK(error_message<FormatError>([&] { format::check_expected(ckpt, expected); }) ==
        dir.path().string() +
            ": tensors do not match the model: missing 2 ('lm_head.weight' [2,3], "
            "'causal.action.b_noise' [4]); wrong shape 1 ('model.embed_tokens.weight' has shape "
            "[2,3], expected [3,2]); unexpected 1 ('causal.head')");
  const std::vector<format::ExpectedTensor> subset = {{"model.norm.weight", {3}}};
  CHECK(error_message<FormatError>(
            [&] { format::check_expected(ckpt, subset, format::ExtraTensors::ignore); }) == "no exception");
  CHECK(error_message<FormatError>([&] { format::check_expected(ckpt, subset); }) ==
        dir.path().string() +
            ": tensors do not match the model: unexpected 2 ('causal.head', "
            "'model.embed_tokens.weight')");

  const auto file = format::SafetensorsFile::open(dir / "model-00002-of-00002.safetensors");
  CHECK(error_message<FormatError>([&] { format::check_expected(file, subset); }) ==
        file.path().string() + ": tensors do not match the model: unexpected 1 ('causal.head')");
}

TEST_CASE("writes are atomic: no temporary remains, a failed write leaves the old file") {
  iotest::TempDir dir;
  const auto path = dir / "model.safetensors";
  const std::vector<float> old_values = {1, 2, 3};
  format::SafetensorsWriter old_writer;
  old_writer.add("w", {3}, old_values);
  old_writer.write(path);
  CHECK(directory_listing(dir.path()) == std::vector<std::string>{"model.safetensors"});
  const std::string old_bytes = iotest::read_bytes(path);

  SUBCASE("a producer that fails halfway through a multi-megabyte tensor") {
    format::SafetensorsWriter writer;
    bool saw_temporary = false;
    writer.add_produced("big", format::Dtype::F32, {1 << 20, 2},  // 8 MiB: several chunks
                        [&](std::size_t first, std::span<std::byte> out) {
                          std::fill(out.begin(), out.end(), std::byte{0x3F});
                          // Mid-write: the destination still holds the old file, the bytes go
                          // to a temporary beside it.
                          CHECK(iotest::read_bytes(path) == old_bytes);
                          saw_temporary = directory_listing(dir.path()).size() == 2;
                          if (first > 0) throw std::runtime_error("disk on fire");
                        });
    CHECK(error_message<std::runtime_error>([&] { writer.write(path); }) == "disk on fire");
    CHECK(saw_temporary);
    CHECK(iotest::read_bytes(path) == old_bytes);
    CHECK(directory_listing(dir.path()) == std::vector<std::string>{"model.safetensors"});
    CHECK(format::SafetensorsFile::open(path).read_vector<float>("w") == old_values);
  }

  SUBCASE("a complete write replaces the file") {
    const std::vector<double> new_values = {9, 8};
    format::SafetensorsWriter writer;
    writer.add("v", {2}, new_values);
    writer.write(path);
    CHECK(directory_listing(dir.path()) == std::vector<std::string>{"model.safetensors"});
    const auto file = format::SafetensorsFile::open(path);
    CHECK(file.names() == std::vector<std::string>{"v"});
    CHECK(file.read_vector<double>("v") == new_values);
  }

  SUBCASE("a destination in a missing directory") {
    format::SafetensorsWriter writer;
    writer.add("w", {3}, old_values);
    const auto bad = dir / "no/such/dir/model.safetensors";
    const std::string message = error_message<std::system_error>([&] { writer.write(bad); });
    CHECK(message.find((dir / "no/such/dir").string()) != std::string::npos);
    CHECK(message.find("cannot create temporary file") != std::string::npos);
  }
}

TEST_CASE("write_file_atomically serves other files (e.g. config.json)") {
  iotest::TempDir dir;
  const auto path = dir / "config.json";
  format::write_file_atomically(path, [](format::AtomicFile& f) { f.write(std::string_view("{\"a\": 1}")); });
  CHECK(iotest::read_bytes(path) == "{\"a\": 1}");
  CHECK(error_message<std::logic_error>([&] {
          format::write_file_atomically(path, [](format::AtomicFile& f) {
            f.write(std::string_view("{\"a\": 2"));
            throw std::logic_error("stop");
          });
        }) == "stop");
  CHECK(iotest::read_bytes(path) == "{\"a\": 1}");
  CHECK(directory_listing(dir.path()) == std::vector<std::string>{"config.json"});
}
