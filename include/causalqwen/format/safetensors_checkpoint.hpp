/// A Hugging Face checkpoint directory's tensors as one namespace: `model.safetensors`, or, when
/// that is absent, the shards listed by `model.safetensors.index.json`
/// (`{"metadata": {...}, "weight_map": {"tensor": "model-00001-of-00002.safetensors", …}}`).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/format/safetensors.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::format {

class SafetensorsCheckpoint {
 public:
  static constexpr std::string_view single_file_name = "model.safetensors";
  static constexpr std::string_view index_file_name = "model.safetensors.index.json";

  /// Opens the checkpoint in `directory`. FormatError naming the file when: neither file
  /// exists; the index is not JSON or has no `weight_map` object of strings; a shard name is
  /// not a plain file name in the directory; a shard is missing or invalid (see
  /// SafetensorsFile::open); or the index places a tensor in a shard that does not hold it.
  static SafetensorsCheckpoint open(const std::filesystem::path& directory,
                                    LoadMode mode = LoadMode::automatic) {
    SafetensorsCheckpoint ckpt;
    ckpt.directory_ = directory;
    const auto single = directory / single_file_name;
    const auto index = directory / index_file_name;
    if (std::filesystem::exists(single)) {
      ckpt.shards_.push_back(SafetensorsFile::open(single, mode));
      for (const auto& name : ckpt.shards_[0].names()) ckpt.shard_of_.emplace(name, 0);
      return ckpt;
    }
    if (!std::filesystem::exists(index))
      throw FormatError(fmt::format("{}: no checkpoint: neither {} nor {} exists",
                                    directory.string(), single_file_name, index_file_name));
    ckpt.open_sharded(index, mode);
    return ckpt;
  }

  const std::filesystem::path& directory() const { return directory_; }
  /// The files opened: one, or the shards in the order of their names.
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> out;
    for (const auto& s : shards_) out.push_back(s.path());
    return out;
  }
  bool is_sharded() const { return sharded_; }

  /// Every tensor name, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(shard_of_.size());
    for (const auto& [name, shard] : shard_of_) out.push_back(name);
    return out;
  }
  std::size_t size() const { return shard_of_.size(); }
  bool contains(std::string_view name) const { return shard_of_.find(name) != shard_of_.end(); }

  /// The file holding tensor `name`; FormatError("tensor 'x' not found in <dir>") if none.
  const SafetensorsFile& file_of(std::string_view name) const {
    auto it = shard_of_.find(name);
    if (it == shard_of_.end())
      throw FormatError(fmt::format("tensor '{}' not found in {}", name, directory_.string()));
    return shards_[it->second];
  }
  const TensorInfo& info(std::string_view name) const { return file_of(name).info(name); }
  /// The `__metadata__` of the single file, or of the first shard.
  const std::map<std::string, std::string>& metadata() const { return shards_.front().metadata(); }

  /// As SafetensorsFile::read, from whichever shard holds the tensor.
  template <FloatElement T>
  void read(std::string_view name, std::span<T> out) const {
    file_of(name).read(name, out);
  }
  template <FloatElement T>
  void read(std::string_view name, std::span<const std::size_t> expected_shape,
            std::span<T> out) const {
    file_of(name).read(name, expected_shape, out);
  }
  template <FloatElement T>
  std::vector<T> read_vector(std::string_view name) const {
    return file_of(name).template read_vector<T>(name);
  }
  void read_int64(std::string_view name, std::span<std::int64_t> out) const {
    file_of(name).read_int64(name, out);
  }
  std::vector<std::int64_t> read_int64_vector(std::string_view name) const {
    return file_of(name).read_int64_vector(name);
  }

 private:
  SafetensorsCheckpoint() = default;  // made by open()

  void open_sharded(const std::filesystem::path& index, LoadMode mode) {
    sharded_ = true;
    const nlohmann::json doc = json::parse_file(index);
    if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object())
      throw FormatError(fmt::format(
          "{}: expected an object with a \"weight_map\" object (tensor name → shard file)",
          index.string()));
    std::map<std::string, std::size_t> shard_index;  // shard file name → index in shards_
    std::map<std::string, std::string> shard_name_of;
    for (const auto& [tensor, file] : doc["weight_map"].items()) {
      if (!file.is_string())
        throw FormatError(fmt::format("{}: weight_map entry of '{}' is a {}, expected a file name",
                                      index.string(), tensor, file.type_name()));
      const std::string& shard = file.get_ref<const std::string&>();
      const std::filesystem::path as_path(shard);
      if (shard.empty() || as_path.has_parent_path() || shard == "." || shard == "..")
        throw FormatError(fmt::format("{}: weight_map entry of '{}' is '{}', expected a file name "
                                      "in the checkpoint directory",
                                      index.string(), tensor, shard));
      shard_index.emplace(shard, 0);
      shard_name_of.emplace(tensor, shard);
    }
    if (shard_index.empty())
      throw FormatError(fmt::format("{}: weight_map is empty", index.string()));
    for (auto& [shard, i] : shard_index) {
      i = shards_.size();
      shards_.push_back(SafetensorsFile::open(directory_ / shard, mode));
    }
    for (const auto& [tensor, shard] : shard_name_of) {
      const std::size_t i = shard_index.at(shard);
      if (!shards_[i].contains(tensor))
        throw FormatError(fmt::format("{}: weight_map places tensor '{}' in {}, which does not "
                                      "hold it",
                                      index.string(), tensor, shard));
      shard_of_.emplace(tensor, i);
    }
  }

  std::filesystem::path directory_;
  bool sharded_ = false;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::size_t, std::less<>> shard_of_;
};

}  // namespace causalqwen::format
