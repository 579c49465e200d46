// Batch JSON bytes → read_batch_json<float> (C = 4).
#include "fuzz_target.hpp"

#include <causalqwen/train/batch_json.hpp>

void run_one(std::string_view bytes) {
  const auto path = cqfuzz::as_file(bytes, "batch.json");
  cqfuzz::refused_or_ok([&] { (void)causalqwen::train::read_batch_json<float>(path, 4); });
}
