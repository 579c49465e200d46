// Writes the seed corpora of the fuzz targets whose inputs are made by the library's own writers
// (safetensors, sharded index, trainer state, checkpoint directory) under DIR/<target>/. Run by
// ctest (fuzz_corpus_current) with --check, which fails when a committed seed differs from what
// the writers produce today.
//   fuzz_make_corpus [--check] DIR
#include <causalqwen/checkpoint/model_config.hpp>
#include <causalqwen/checkpoint/model_checkpoint.hpp>
#include <causalqwen/format/safetensors.hpp>
#include <causalqwen/format/safetensors_writer.hpp>
#include <causalqwen/train/training_state.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace cq = causalqwen;

namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The bytes `writer` writes.
std::string written(const cq::format::SafetensorsWriter& writer, const fs::path& scratch) {
  writer.write(scratch);
  return read_bytes(scratch);
}

/// Every seed: "<target>/<file>" → bytes.
std::map<std::string, std::string> seeds(const fs::path& scratch) {
  namespace format = cq::format;
  namespace checkpoint = cq::checkpoint;
  std::map<std::string, std::string> out;
  const std::vector<float> a = {1.5f, -2.0f, 0.0f, 3.25f, 1e30f, -1e-30f};
  const std::vector<double> b = {0.1, 42.0};

  format::SafetensorsWriter mixed;  // every floating dtype, a scalar, metadata
  mixed.set_metadata("format", "pt");
  mixed.add("model.embed_tokens.weight", {2, 3}, std::span<const float>(a));
  mixed.add("causal.ovr_threshold", {2}, std::span<const double>(b), format::Dtype::F64);
  mixed.add("lm_head.weight", {3, 2}, std::span<const float>(a), format::Dtype::BF16);
  mixed.add("scalar", {}, std::span<const float>(a.data(), 1), format::Dtype::F16);
  out["safetensors/mixed_dtypes.safetensors"] = written(mixed, scratch / "x.safetensors");
  out["safetensors/empty.safetensors"] = written(format::SafetensorsWriter{}, scratch / "x.safetensors");

  out["sharded_index/two_shards.json"] =
      R"({"metadata": {"total_size": 28}, "weight_map": {"a": "model-00001-of-00002.safetensors", )"
      R"("b": "model-00002-of-00002.safetensors"}})"
      "\n";

  cq::train::TrainerState state;
  state.step = 120;
  state.adam_steps = 120;
  state.rng = cq::train::rng_state(std::mt19937_64(7));
  state.data = {{"train", {{"cursor", 3}}}};
  state.tokens_seen = 15360;
  state.seconds = 12.5;
  state.run = {{"lr", 7.5e-4}, {"optimizer", "adamw"}};
  out["trainer_state/step_120.json"] = state.to_json().dump(2) + "\n";

  // A tiny trained-format checkpoint (causal.* tensors present) and the same backbone alone (a
  // base checkpoint, converted on load).
  const auto config_text = std::string(
      R"({"vocab_size": 32, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, )"
      R"("num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64, )"
      R"("tie_word_embeddings": false, "num_token_id": 20})");
  const fs::path model_dir = scratch / "model";
  fs::create_directories(model_dir);
  std::ofstream(model_dir / "config.json") << config_text;
  const auto cfg = checkpoint::read_config_json(model_dir / "config.json");
  cq::model::CausalQwen<float> model(cfg.config, 16);
  model.init_random(11);
  checkpoint::save_model(model_dir, model, cfg.json);
  out["checkpoint_dir/causal.bin"] =
      read_bytes(model_dir / "config.json") + std::string(1, '\0') + read_bytes(model_dir / "model.safetensors");
  const auto saved = format::SafetensorsFile::open(model_dir / "model.safetensors");
  format::SafetensorsWriter base;
  std::vector<std::vector<float>> kept;
  kept.reserve(saved.size());
  for (const auto& name : saved.names()) {
    if (name.starts_with("causal.")) continue;
    kept.push_back(saved.read_vector<float>(name));
    base.add(name, saved.info(name).shape, std::span<const float>(kept.back()));
  }
  out["checkpoint_dir/base.bin"] = config_text + std::string(1, '\0') + written(base, scratch / "x.safetensors");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc == 3 && std::string(argv[1]) == "--check";
  if (argc != (check ? 3 : 2)) {
    std::fprintf(stderr, "usage: fuzz_make_corpus [--check] DIR\n");
    return 2;
  }
  const fs::path root = argv[argc - 1];
  const fs::path scratch = fs::temp_directory_path() / ("causalqwen_make_corpus_" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  int differing = 0;
  for (const auto& [name, bytes] : seeds(scratch)) {
    const fs::path path = root / name;
    if (check) {
      if (read_bytes(path) != bytes) {
        std::fprintf(stderr, "%s: differs from what the library's writers produce (run fuzz_make_corpus %s)\n",
                     path.c_str(), root.c_str());
        ++differing;
      }
    } else {
      fs::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
      std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
    }
  }
  fs::remove_all(scratch);
  return differing == 0 ? 0 : 1;
}
