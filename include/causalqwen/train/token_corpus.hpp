/// A tokenized corpus: sequences of token ids with their numbers, stored flat.
///
/// encode_corpus runs Tokenizer::encode_with_numbers on each text (every number becomes one
/// <NUM> whose value sits at the same position) and, by default, appends <|endoftext|> with
/// value 0, so that a model learns where a text ends and packed texts stay separated.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/text/tokenizer.hpp"
#include "causalqwen/train/random.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::train {

using text::TokenId;

/// Sequences stored flat: sequence k is ids[offsets[k] .. offsets[k+1]) with its values.
struct TokenCorpus {
  std::vector<TokenId> ids;
  std::vector<double> values;           ///< the number at each <NUM>, 0 elsewhere
  std::vector<std::size_t> offsets{0};  ///< size() + 1 entries
  TokenId pad_id = 0;                   ///< written on padding
  TokenId num_id = -1;                  ///< the tokenizer's <NUM>

  std::size_t size() const { return offsets.size() - 1; }
  std::size_t token_count() const { return ids.size(); }
  std::size_t length(std::size_t k) const { return offsets[k + 1] - offsets[k]; }
  std::span<const TokenId> ids_of(std::size_t k) const {
    return {ids.data() + offsets[k], length(k)};
  }
  std::span<const double> values_of(std::size_t k) const {
    return {values.data() + offsets[k], length(k)};
  }
  /// Appends one sequence (ids and values of equal length).
  void add(std::span<const TokenId> seq_ids, std::span<const double> seq_values) {
    if (seq_ids.size() != seq_values.size())
      throw DomainError(fmt::format("causalqwen::train::TokenCorpus::add: {} ids but {} values",
                                    seq_ids.size(), seq_values.size()));
    ids.insert(ids.end(), seq_ids.begin(), seq_ids.end());
    values.insert(values.end(), seq_values.begin(), seq_values.end());
    offsets.push_back(ids.size());
  }
  /// The numbers of the corpus: values[i] at every i with ids[i] = num_id, in order.
  std::vector<double> numbers() const {
    std::vector<double> out;
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == num_id) out.push_back(values[i]);
    return out;
  }
  /// A hash of the content (ids, values, boundaries): checkpoints store it so that a data
  /// position is never restored onto other data.
  std::uint64_t fingerprint() const {
    std::uint64_t h = splitmix64(size()) ^ splitmix64(token_count() + 1);
    const auto bytes = [&h](const void* p, std::size_t n) {
      h = fnv1a64(std::string_view(static_cast<const char*>(p), n), h);
    };
    bytes(ids.data(), ids.size() * sizeof(TokenId));
    bytes(values.data(), values.size() * sizeof(double));
    bytes(offsets.data(), offsets.size() * sizeof(std::size_t));
    return h;
  }
};

struct CorpusEncodeOptions {
  bool append_eos = true;   ///< end every sequence with the end-of-text token
  std::string eos_token = "<|endoftext|>";
  bool numbers = true;      ///< numbers → <NUM> (false: numbers stay digit tokens)
};

/// The end-of-text id of `tokenizer` (DomainError naming the token when it has none).
inline TokenId eos_id_of(const text::Tokenizer& tokenizer, const std::string& eos_token = "<|endoftext|>") {
  const auto id = tokenizer.token_to_id(eos_token);
  if (!id)
    throw DomainError(fmt::format("causalqwen::train: the tokenizer has no end-of-text token \"{}\"",
                                  eos_token));
  return *id;
}

/// Tokenizes every text with numbers: sequence k = encode_with_numbers(texts[k]) (+ EOS).
/// pad_id is the EOS id (or 0 when no EOS is appended and the tokenizer has none).
inline TokenCorpus encode_corpus(const text::Tokenizer& tokenizer, std::span<const std::string> texts,
                                 const CorpusEncodeOptions& options = {}) {
  TokenCorpus c;
  c.num_id = tokenizer.num_token_id();
  const auto eos = tokenizer.token_to_id(options.eos_token);
  if (options.append_eos && !eos) eos_id_of(tokenizer, options.eos_token);  // throws
  c.pad_id = eos.value_or(0);
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  c.ids.reserve(bytes / 3 + texts.size() * 2);
  c.values.reserve(bytes / 3 + texts.size() * 2);
  for (const auto& t : texts) {
    text::NumericEncoding e;
    if (options.numbers) {
      e = tokenizer.encode_with_numbers(t);
    } else {
      e.input_ids = tokenizer.encode(t);
      e.numeric_values.assign(e.input_ids.size(), 0.0);
    }
    if (options.append_eos) {
      e.input_ids.push_back(*eos);
      e.numeric_values.push_back(0.0);
    }
    c.add(e.input_ids, e.numeric_values);
  }
  return c;
}

}  // namespace causalqwen::train
