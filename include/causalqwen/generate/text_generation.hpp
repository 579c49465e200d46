/// Text in, text out: prompts are encoded with their numbers (each number one <NUM> whose value
/// the numeric embedding sees), continued by generate::Generator in any mode, and rendered back
/// with the generated numbers written in (render.hpp). Adds what needs the tokenizer: EOS ids
/// (<|endoftext|>, <|im_end|> when the tokenizer has them), stop strings (a row stops once its
/// generated text contains one; the text is cut right after it), and streaming of text deltas.
/// Bad input is refused before generation with a DomainError naming the prompt: a number that
/// does not fit T (1e300 as float32), max_new_tokens above max_new_tokens_limit, and a prompt
/// whose P tokens with N = max_new_tokens would pass max_sequence_length L (when given):
/// the model sees P + N − 1 positions (the last generated token is never fed back), so
/// P + N − 1 ≤ L, unless long_prompt is keep_end, which drops the prompt's first tokens until it
/// holds.
#pragma once
#include "causalqwen/generate/render.hpp"
#include "causalqwen/generate/generator.hpp"
#include "causalqwen/text/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace causalqwen::generate {

/// What run() does with a prompt of P tokens when P + max_new_tokens − 1 > max_sequence_length.
enum class LongPrompt {
  error,     ///< DomainError naming the prompt, its length and the limit
  keep_end,  ///< drop the prompt's first tokens until prompt + max_new_tokens fits
};

struct TextGenerationOptions {
  generate::GenerationOptions generation;  // eos_ids empty: the tokenizer's EOS tokens
  std::vector<std::string> stop_strings;
  RenderOptions render;
  std::uint64_t seed = 0;  // prompt i gets the stream row_seed(seed, first_row + i)
  std::size_t first_row = 0;
  /// The longest sequence (prompt + generated tokens) the model takes, e.g. config.json's
  /// max_position_embeddings; 0: no limit.
  std::size_t max_sequence_length = 0;
  LongPrompt long_prompt = LongPrompt::error;
};

/// One continuation.
struct TextResult {
  std::string prompt;
  std::vector<std::int64_t> prompt_ids;
  generate::GenerationResult generation;
  std::string text;  // the rendered continuation (cut after a stop string)
};

/// Called with (row, new text) as a row's rendered continuation grows (for streaming).
using TextStream = std::function<void(std::size_t row, const std::string& delta)>;

/// The EOS ids of a Qwen2-family tokenizer that it has: <|endoftext|>, <|im_end|>.
inline std::vector<std::int64_t> default_eos_ids(const text::Tokenizer& tok) {
  std::vector<std::int64_t> ids;
  for (const char* s : {"<|endoftext|>", "<|im_end|>"})
    if (auto id = tok.token_to_id(s)) ids.push_back(*id);
  return ids;
}

/// A prompt encoded for generation: its ids and numbers, cut per `long_prompt` (see the file
/// comment). `index` names the prompt in errors; `limit` = 0: no limit.
template <class T>
generate::PromptInput encode_prompt(const text::Tokenizer& tok, const std::string& prompt, std::size_t index,
                                    std::size_t new_tokens, std::size_t limit, LongPrompt long_prompt) {
  auto enc = tok.encode_with_numbers(prompt);
  detail::require(!enc.input_ids.empty(), "TextGenerator", "prompt {} encodes to no token", index);
  for (const auto& span : enc.spans)
    detail::require(std::fabs(span.value) <= static_cast<double>(std::numeric_limits<T>::max()), "TextGenerator",
                    "prompt {} holds the number {}, which does not fit the model's {}-bit floats "
                    "(|value| <= {:g})", index, span.spelling, 8 * sizeof(T), std::numeric_limits<T>::max());
  const std::size_t positions = enc.input_ids.size() + new_tokens - (new_tokens > 0 ? 1 : 0);
  if (limit != 0 && positions > limit) {
    detail::require(long_prompt == LongPrompt::keep_end, "TextGenerator",
                    "prompt {} has {} tokens; with max_new_tokens {} the model would see {} positions, "
                    "more than its {} (shorten it, lower max_new_tokens, or keep its end)",
                    index, enc.input_ids.size(), new_tokens, positions, limit);
    const auto drop = static_cast<std::ptrdiff_t>(positions - limit);
    enc.input_ids.erase(enc.input_ids.begin(), enc.input_ids.begin() + drop);
    enc.numeric_values.erase(enc.numeric_values.begin(), enc.numeric_values.begin() + drop);
  }
  return {std::vector<std::int64_t>(enc.input_ids.begin(), enc.input_ids.end()), enc.numeric_values, 0};
}

/// The rendered continuation of one row as it grows, token by token: whether a stop string has
/// appeared (the text is then cut right after its first end), and the text that may be shown
/// so far (a trailing U+FFFD is held back while the row runs: the character may complete with
/// the next token).
class TextRow {
 public:
  TextRow(const text::Tokenizer& tok, const std::vector<std::string>& stop_strings, const RenderOptions& render)
      : tok_(&tok), stops_(&stop_strings), render_(render) {}

  /// After each token of `so_far`: true once a stop string is in the text; `delta` (may be null)
  /// gets the text that became showable.
  bool update(const generate::GenerationResult& so_far, std::string* delta) {
    text_ = render_tokens(*tok_, so_far.tokens, render_);
    bool stop = false;
    for (const auto& s : *stops_) {
      const auto at = text_.find(s);
      if (!s.empty() && at != std::string::npos) {
        cut_ = std::min(cut_, at + s.size());
        stop = true;
      }
    }
    if (delta) {
      delta->clear();
      std::string shown = text_.substr(0, std::min(cut_, text_.size()));
      std::size_t end = shown.size();
      if (!stop && end >= 3 && shown.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
      if (end > streamed_) {
        *delta = shown.substr(streamed_, end - streamed_);
        streamed_ = end;
      }
    }
    return stop;
  }

  /// The final text of `result` (cut after a stop string); `rest` (may be null) gets what was
  /// not shown yet.
  std::string finish(const generate::GenerationResult& result, std::string* rest) {
    std::string out = render_tokens(*tok_, result.tokens, render_);
    if (cut_ != std::string::npos) out.resize(std::min(cut_, out.size()));
    if (rest) *rest = out.size() > streamed_ ? out.substr(streamed_) : std::string();
    streamed_ = std::max(streamed_, out.size());
    return out;
  }

 private:
  const text::Tokenizer* tok_;
  const std::vector<std::string>* stops_;
  RenderOptions render_;
  std::string text_;
  std::size_t streamed_ = 0, cut_ = std::string::npos;
};

/// Encodes, generates and renders (see the file comment).
template <class T>
class TextGenerator {
 public:
  TextGenerator(model::CausalQwen<T>& model, const text::Tokenizer& tok) : gen_(model), tok_(tok) {}

  std::vector<TextResult> run(const std::vector<std::string>& prompts, const TextGenerationOptions& o,
                              const TextStream& stream = {}) {
    std::vector<generate::PromptInput> inputs;
    std::vector<TextResult> out(prompts.size());
    const std::size_t new_tokens = o.generation.max_new_tokens;
    detail::require(new_tokens <= max_new_tokens_limit, "TextGenerator",
                    "max_new_tokens {} exceeds the limit of {} tokens", new_tokens, max_new_tokens_limit);
    const std::size_t limit = o.max_sequence_length;
    detail::require(limit == 0 || new_tokens <= limit, "TextGenerator",
                    "max_new_tokens {} leaves no room for a prompt in the model's {} positions", new_tokens, limit);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      auto input = encode_prompt<T>(tok_, prompts[i], i, new_tokens, limit, o.long_prompt);
      input.seed = generate::row_seed(o.seed, o.first_row + i);
      out[i].prompt = prompts[i];
      out[i].prompt_ids = input.ids;
      inputs.push_back(std::move(input));
    }
    auto g = o.generation;
    if (g.eos_ids.empty()) g.eos_ids = default_eos_ids(tok_);
    std::vector<TextRow> rows(prompts.size(), TextRow(tok_, o.stop_strings, o.render));
    std::string delta;
    const bool watch = stream || !o.stop_strings.empty();
    const generate::TokenHook hook = [&](std::size_t row, const generate::GenerationResult& r) {
      const bool stop = rows[row].update(r, stream ? &delta : nullptr);
      if (stream && !delta.empty()) stream(row, delta);
      return stop;
    };
    auto results = gen_.run(std::span<const generate::PromptInput>(inputs), g, watch ? hook : generate::TokenHook{});
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      out[i].generation = std::move(results[i]);
      out[i].text = rows[i].finish(out[i].generation, stream ? &delta : nullptr);
      if (stream && !delta.empty()) stream(i, delta);
    }
    return out;
  }

 private:
  generate::Generator<T> gen_;
  const text::Tokenizer& tok_;
};

}  // namespace causalqwen::generate
