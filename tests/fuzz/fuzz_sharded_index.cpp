// model.safetensors.index.json bytes → SafetensorsCheckpoint::open on a directory that also holds
// two valid shards (written once per process by the library's writer) → every tensor read.
#include "fuzz_target.hpp"

#include <causalqwen/format/safetensors_checkpoint.hpp>
#include <causalqwen/format/safetensors_writer.hpp>

#include <vector>

namespace {

/// A directory of this process with model-00001-of-00002.safetensors (tensor "a", F32 [2,3]) and
/// model-00002-of-00002.safetensors (tensor "b", BF16 [2]), written on the first input and kept
/// for every later one (a per-input scratch directory would be gone after the first input, and
/// every later input would fail on the missing files whatever its bytes).
const std::filesystem::path& shard_directory() {
  static const std::filesystem::path dir = [] {
    namespace format = causalqwen::format;
    const auto d = cqfuzz::kept_directory("sharded");
    const std::vector<float> a = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f};
    format::SafetensorsWriter first;
    first.add("a", {2, 3}, std::span<const float>(a));
    first.write(d / "model-00001-of-00002.safetensors");
    format::SafetensorsWriter second;
    second.add("b", {2}, std::span<const float>(a.data(), 2), format::Dtype::BF16);
    second.write(d / "model-00002-of-00002.safetensors");
    return d;
  }();
  return dir;
}

}  // namespace

void run_one(std::string_view bytes) {
  namespace format = causalqwen::format;
  const auto& dir = shard_directory();
  cqfuzz::write_file(dir / "model.safetensors.index.json", bytes);
  cqfuzz::refused_or_ok([&] {
    const auto ckpt = format::SafetensorsCheckpoint::open(dir);
    for (const auto& name : ckpt.names()) (void)ckpt.file_of(name).read_vector<double>(name);
  });
}
