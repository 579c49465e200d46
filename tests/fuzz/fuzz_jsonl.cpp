// JSONL bytes → read_jsonl_texts.
#include "fuzz_target.hpp"

#include <causalqwen/train/jsonl_dataset.hpp>

void run_one(std::string_view bytes) {
  const auto path = cqfuzz::as_file(bytes, "data.jsonl");
  cqfuzz::refused_or_ok([&] { (void)causalqwen::train::read_jsonl_texts(path); });
}
