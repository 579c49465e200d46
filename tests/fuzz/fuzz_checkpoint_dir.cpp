// A model checkpoint directory → checkpoint::load_model<float>. The input is config.json, one NUL byte,
// then model.safetensors (JSON text holds no NUL, so the first one splits the two files). The
// harness skips configs whose parameters exceed 200,000 (the loader itself accepts any model that
// fits the memory; the fuzzer's memory limit does not).
#include "fuzz_target.hpp"

#include <causalqwen/checkpoint/model_checkpoint.hpp>
#include <causalqwen/checkpoint/model_size.hpp>

void run_one(std::string_view bytes) {
  namespace checkpoint = causalqwen::checkpoint;
  const std::size_t split = std::min(bytes.find('\0'), bytes.size());
  const auto dir = cqfuzz::scratch("checkpoint");
  std::filesystem::create_directories(dir);
  cqfuzz::write_file(dir / "config.json", bytes.substr(0, split));
  cqfuzz::write_file(dir / "model.safetensors", split < bytes.size() ? bytes.substr(split + 1) : std::string_view{});
  cqfuzz::refused_or_ok([&] {
    if (checkpoint::estimated_parameter_count(checkpoint::read_config_json(dir / "config.json", 20).config) > 2e5) return;
    checkpoint::LoadOptions options;
    options.num_token_id = 20;
    options.class_chunk = 16;
    (void)checkpoint::load_model<float>(dir, options);
  });
}
