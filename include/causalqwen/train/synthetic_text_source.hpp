/// The synthetic-text training source: synthetic sentences → tokenized with numbers (each
/// ending in <|endoftext|>) → packed or padded [B,S] batches by CorpusBatchSource, and the
/// validation batches of the held-out sentences.
///
///   auto train = synthetic_sentences(DataSplit::train, 20000, seed);
///   auto val   = synthetic_sentences(DataSplit::validation, 512, seed);
///   auto source = make_synthetic_text_source<float>(tokenizer, train, {.batch_size = 8, .seq_len = 64});
///   auto eval   = synthetic_validation_batches<float>(tokenizer, val, 8, 64);
#pragma once
#include "causalqwen/train/corpus_batch_source.hpp"
#include "causalqwen/train/synthetic_text.hpp"
#include "causalqwen/train/token_corpus.hpp"

#include <memory>
#include <span>
#include <vector>

namespace causalqwen::train {

/// The sentences tokenized with numbers, each followed by <|endoftext|>.
inline std::shared_ptr<const TokenCorpus> synthetic_corpus(const text::Tokenizer& tokenizer,
                                                           std::span<const SyntheticSentence> sentences) {
  const auto texts = texts_of(sentences);
  return std::make_shared<const TokenCorpus>(encode_corpus(tokenizer, texts));
}

/// A TokenBatchSource over `sentences` (see corpus_batch_source.hpp for the layouts, the
/// epochs' shuffling and state()/restore()).
template <class T>
std::unique_ptr<CorpusBatchSource<T>> make_synthetic_text_source(const text::Tokenizer& tokenizer,
                                                                 std::span<const SyntheticSentence> sentences,
                                                                 const CorpusBatchOptions& options) {
  return std::make_unique<CorpusBatchSource<T>>(synthetic_corpus(tokenizer, sentences), options);
}

/// One pass over `sentences` for evaluation: padded, one sentence per row, in order (row r of
/// batch k is sentence k·B + r), so predictions can be matched with encode_held_out().
template <class T>
std::vector<io::BatchData<T>> synthetic_validation_batches(const text::Tokenizer& tokenizer,
                                                           std::span<const SyntheticSentence> sentences,
                                                           std::size_t batch_size, std::size_t seq_len) {
  return evaluation_batches<T>(*synthetic_corpus(tokenizer, sentences), batch_size, seq_len,
                               BatchLayout::padded);
}

}  // namespace causalqwen::train
