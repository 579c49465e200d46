/// Batch encoding for training: texts → rectangular [B, S] tensors.
///
///   input_ids[b, i]       token i of text b (pad_token_id on padding)
///   numeric_values[b, i]  the value of token i when it is <NUM>, else 0
///   attention_mask[b, i]  1 on real tokens, 0 on padding
///   labels[b, i]          input_ids[b, i+1] when token i+1 is real (next-token prediction:
///                         output position i predicts token i+1), else −100 (ignored)
///   target_values[b, i]   numeric_values[b, i+1] when labels[b, i] is real, else 0, so that a
///                         <NUM> label and its value always sit at the same position
///
/// Truncation keeps the first max_length tokens. A number is one <NUM> token whose value sits
/// at the same position, so a cut never separates a value from its <NUM>; the last kept
/// position has label −100 (its next token was cut away with its value).
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/text/labels.hpp>
#include <causalqwen/text/padding.hpp>
#include <causalqwen/core/xt.hpp>
#include <causalqwen/text/tokenizer.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::text {

/// How short sequences are padded.
enum class Padding {
  longest,     ///< to the longest sequence of the batch (after truncation)
  max_length,  ///< to options.max_length
};

struct BatchOptions {
  std::size_t max_length = 0;  ///< 0: no limit
  bool truncation = true;      ///< cut longer sequences to max_length (false: DomainError)
  Padding padding = Padding::longest;
  PaddingSide padding_side = PaddingSide::right;  ///< text/padding.hpp
  /// Id written on padding; by default <|endoftext|> when the tokenizer has it, else 0.
  std::optional<TokenId> pad_token_id = std::nullopt;
  bool numbers = true;  ///< encode_with_numbers (true) or plain encode (false)
};

struct TrainingBatch {
  xt::xtensor<TokenId, 2> input_ids, attention_mask, labels;
  xt::xtensor<double, 2> numeric_values, target_values;
  std::vector<std::size_t> lengths;             ///< real tokens per row
  std::vector<std::vector<NumberSpan>> spans;   ///< kept numbers per row (token_index in row)
};

/// Encodes `texts` into one training batch (see the top of this file).
inline TrainingBatch encode_batch(const Tokenizer& tokenizer, std::span<const std::string> texts,
                                  const BatchOptions& options = {}) {
  if (options.padding == Padding::max_length && options.max_length == 0)
    throw DomainError("causalqwen::text::encode_batch: padding = max_length needs max_length > 0");
  const TokenId pad = options.pad_token_id.value_or(tokenizer.token_to_id("<|endoftext|>").value_or(0));
  std::vector<NumericEncoding> rows;
  rows.reserve(texts.size());
  for (std::size_t b = 0; b < texts.size(); ++b) {
    NumericEncoding e;
    if (options.numbers) {
      e = tokenizer.encode_with_numbers(texts[b]);
    } else {
      e.input_ids = tokenizer.encode(texts[b]);
      e.numeric_values.assign(e.input_ids.size(), 0.0);
    }
    if (options.max_length && e.input_ids.size() > options.max_length) {
      if (!options.truncation)
        throw DomainError(fmt::format("causalqwen::text::encode_batch: texts[{}] has {} tokens, more than "
                                      "max_length = {}, and truncation is off", b, e.input_ids.size(),
                                      options.max_length));
      e.input_ids.resize(options.max_length);
      e.numeric_values.resize(options.max_length);
      std::erase_if(e.spans, [&](const NumberSpan& s) { return s.token_index >= options.max_length; });
    }
    rows.push_back(std::move(e));
  }
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.input_ids.size());
  if (options.padding == Padding::max_length) width = options.max_length;

  const std::size_t batch = rows.size();
  TrainingBatch out;
  out.input_ids = xt::xtensor<TokenId, 2>::from_shape({batch, width});
  out.input_ids.fill(pad);
  out.attention_mask = xt::zeros<TokenId>({batch, width});
  out.labels = xt::xtensor<TokenId, 2>::from_shape({batch, width});
  out.labels.fill(static_cast<TokenId>(ignore_index));
  out.numeric_values = xt::zeros<double>({batch, width});
  out.target_values = xt::zeros<double>({batch, width});
  for (std::size_t b = 0; b < batch; ++b) {
    const auto& r = rows[b];
    const std::size_t n = r.input_ids.size();
    const std::size_t offset = options.padding_side == PaddingSide::left ? width - n : 0;
    for (std::size_t i = 0; i < n; ++i) {
      out.input_ids(b, offset + i) = r.input_ids[i];
      out.numeric_values(b, offset + i) = r.numeric_values[i];
      out.attention_mask(b, offset + i) = 1;
      if (i + 1 < n) {
        out.labels(b, offset + i) = r.input_ids[i + 1];
        out.target_values(b, offset + i) = r.numeric_values[i + 1];
      }
    }
    out.lengths.push_back(n);
    std::vector<NumberSpan> spans = r.spans;
    for (auto& s : spans) s.token_index += offset;
    out.spans.push_back(std::move(spans));
  }
  return out;
}

}  // namespace causalqwen::text
