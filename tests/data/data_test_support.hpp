// Helpers shared by the data tests: a tokenizer trained on the synthetic corpus, temporary
// files, and a check that a batch's labels and targets are aligned with its inputs.
#pragma once
#include <causalqwen/text/bpe_trainer.hpp>
#include <causalqwen/datasets/synthetic_text.hpp>

#include "../support/test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace cqdata {

namespace text = causalqwen::text;
namespace tr = causalqwen::train;
namespace ds = causalqwen::datasets;

/// A 400-token tokenizer trained on 4,000 synthetic training sentences (seed 7), built once.
inline const text::Tokenizer& synthetic_tokenizer() {
  static const text::Tokenizer tok = [] {
    const auto sentences = ds::synthetic_sentences(tr::DataSplit::train, 4000, 7);
    return text::train_bpe(ds::texts_of(sentences), {.vocab_size = 400}).tokenizer();
  }();
  return tok;
}

/// A path under the test's build folder.
inline std::filesystem::path temp_path(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(CQ_DATA_TMP) / "tmp";
  std::filesystem::create_directories(dir);
  return dir / name;
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace cqdata
