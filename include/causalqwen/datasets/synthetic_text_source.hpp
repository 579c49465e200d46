/// The synthetic-text training source: synthetic sentences → tokenized with numbers (each
/// ending in <|endoftext|>) → packed or padded [B,S] batches by train::CorpusBatchSource, and the
/// validation batches of the held-out sentences.
///
///   auto sentences = synthetic_sentences(train::DataSplit::train, 20000, seed);
///   auto val   = synthetic_sentences(train::DataSplit::validation, 512, seed);
///   auto source = make_synthetic_text_source<float>(tokenizer, sentences, {.batch_size = 8, .seq_len = 64});
///   auto eval   = synthetic_validation_batches<float>(tokenizer, val, 8, 64);
#pragma once
#include "causalqwen/datasets/synthetic_text.hpp"
#include "causalqwen/train/corpus_batch_source.hpp"
#include "causalqwen/train/token_corpus.hpp"

#include <memory>
#include <span>
#include <vector>

namespace causalqwen::datasets {

/// The sentences tokenized with numbers, each followed by <|endoftext|>.
inline std::shared_ptr<const train::TokenCorpus> synthetic_corpus(const text::Tokenizer& tokenizer,
                                                           std::span<const SyntheticSentence> sentences) {
  const auto texts = texts_of(sentences);
  return std::make_shared<const train::TokenCorpus>(train::encode_corpus(tokenizer, texts));
}

/// A TokenBatchSource over `sentences` (see corpus_batch_source.hpp for the layouts, the
/// epochs' shuffling and state()/restore()).
template <class T>
std::unique_ptr<train::CorpusBatchSource<T>> make_synthetic_text_source(const text::Tokenizer& tokenizer,
                                                                 std::span<const SyntheticSentence> sentences,
                                                                 const train::CorpusBatchOptions& options) {
  return std::make_unique<train::CorpusBatchSource<T>>(synthetic_corpus(tokenizer, sentences), options);
}

/// One pass over `sentences` for evaluation: padded, one sentence per row, in order (row r of
/// batch k is sentence k·B + r), so predictions can be matched with encode_held_out().
template <class T>
std::vector<train::BatchData<T>> synthetic_validation_batches(const text::Tokenizer& tokenizer,
                                                           std::span<const SyntheticSentence> sentences,
                                                           std::size_t batch_size, std::size_t seq_len) {
  return train::evaluation_batches<T>(*synthetic_corpus(tokenizer, sentences), batch_size, seq_len,
                               train::BatchLayout::padded);
}

}  // namespace causalqwen::datasets
