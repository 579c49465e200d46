// config.json bytes → read_config_json (sizes and memory checked before any allocation).
#include "fuzz_target.hpp"

#include <causalqwen/checkpoint/model_config.hpp>

void run_one(std::string_view bytes) {
  const auto path = cqfuzz::as_file(bytes, "config.json");
  cqfuzz::refused_or_ok([&] { (void)causalqwen::checkpoint::read_config_json(path, 20); });
}
