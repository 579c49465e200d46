/// Text in, text out: prompts are encoded with their numbers (each number one <NUM> whose value
/// the numeric embedding sees), continued by generate::Generator in any mode, and rendered back
/// with the generated numbers written in (render.hpp). Adds what needs the tokenizer: EOS ids
/// (<|endoftext|>, <|im_end|> when the tokenizer has them), stop strings (a row stops once its
/// generated text contains one; the text is cut right after it), and streaming of text deltas.
#pragma once
#include "causalqwen/generate/render.hpp"
#include "causalqwen/generate/generator.hpp"
#include "causalqwen/text/tokenizer.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace causalqwen::generate {

struct TextGenerationOptions {
  generate::GenerationOptions generation;  // eos_ids empty: the tokenizer's EOS tokens
  std::vector<std::string> stop_strings;
  RenderOptions render;
  std::uint64_t seed = 0;  // prompt i gets the stream row_seed(seed, first_row + i)
  std::size_t first_row = 0;
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

/// Encodes, generates and renders (see the file comment).
template <class T>
class TextGenerator {
 public:
  TextGenerator(model::CausalQwen<T>& model, const text::Tokenizer& tok) : gen_(model), tok_(tok) {}

  std::vector<TextResult> run(const std::vector<std::string>& prompts, const TextGenerationOptions& o,
                              const TextStream& stream = {}) {
    std::vector<generate::PromptInput> inputs;
    std::vector<TextResult> out(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      auto enc = tok_.encode_with_numbers(prompts[i]);
      detail::require(!enc.input_ids.empty(), "TextGenerator", "prompt {} encodes to no token", i);
      out[i].prompt = prompts[i];
      out[i].prompt_ids.assign(enc.input_ids.begin(), enc.input_ids.end());
      inputs.push_back({out[i].prompt_ids, enc.numeric_values, generate::row_seed(o.seed, o.first_row + i)});
    }
    auto g = o.generation;
    if (g.eos_ids.empty()) g.eos_ids = default_eos_ids(tok_);
    std::vector<std::string> text(prompts.size());
    std::vector<std::size_t> streamed(prompts.size(), 0), cut(prompts.size(), std::string::npos);
    const bool watch = stream || !o.stop_strings.empty();
    const generate::TokenHook hook = [&](std::size_t row, const generate::GenerationResult& r) {
      text[row] = render_tokens(tok_, r.tokens, o.render);
      bool stop = false;
      for (const auto& s : o.stop_strings) {
        const auto at = text[row].find(s);
        if (!s.empty() && at != std::string::npos) {
          cut[row] = std::min(cut[row], at + s.size());
          stop = true;
        }
      }
      if (stream) {
        std::string shown = text[row].substr(0, std::min(cut[row], text[row].size()));
        // hold back a trailing U+FFFD: the character may complete with the next token
        std::size_t end = shown.size();
        if (!stop && end >= 3 && shown.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
        if (end > streamed[row]) {
          stream(row, shown.substr(streamed[row], end - streamed[row]));
          streamed[row] = end;
        }
      }
      return stop;
    };
    auto results = gen_.run(std::span<const generate::PromptInput>(inputs), g, watch ? hook : generate::TokenHook{});
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      out[i].generation = std::move(results[i]);
      out[i].text = render_tokens(tok_, out[i].generation.tokens, o.render);
      if (cut[i] != std::string::npos) out[i].text.resize(std::min(cut[i], out[i].text.size()));
      if (stream && out[i].text.size() > streamed[i]) stream(i, out[i].text.substr(streamed[i]));
    }
    return out;
  }

 private:
  generate::Generator<T> gen_;
  const text::Tokenizer& tok_;
};

}  // namespace causalqwen::generate
