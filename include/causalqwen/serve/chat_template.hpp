/// Chat messages into a prompt, for the templates the server recognises (as llama.cpp
/// recognises known templates instead of running Jinja): a tokenizer_config.json whose
/// "chat_template" writes <|im_start|> and <|im_end|> (Qwen2's ChatML), with a tokenizer that has
/// both tokens, renders
///   <|im_start|>{role}\n{content}<|im_end|>\n   for each message, then   <|im_start|>assistant\n
/// Anything else is refused with a DomainError naming the file.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/serve/api_request.hpp"
#include "causalqwen/text/tokenizer.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace causalqwen::serve {

enum class ChatTemplate { chatml };

/// The template of `config_path` (tokenizer_config.json) for `tok`: ChatML, or DomainError
/// naming the file and saying what is missing.
inline ChatTemplate recognise_chat_template(const std::filesystem::path& config_path, const text::Tokenizer& tok) {
  // read whole (json::read_file_text: a read error or a file past 256 MiB is refused), every
  // refusal of this function a DomainError
  std::string text;
  try {
    text = json::read_file_text(config_path, "file (a chat template is read from it)");
  } catch (const FormatError& e) {
    throw DomainError(std::string("causalqwen::chat: ") + e.what());
  }
  const auto j = nlohmann::json::parse(text, nullptr, false);
  detail::require(!j.is_discarded() && j.is_object(), "chat", "{}: not a JSON object", config_path.string());
  const auto it = j.find("chat_template");
  detail::require(it != j.end() && it->is_string(), "chat", "{}: no \"chat_template\" string", config_path.string());
  const auto t = it->get<std::string>();
  detail::require(t.find("<|im_start|>") != std::string::npos && t.find("<|im_end|>") != std::string::npos, "chat",
                  "{}: the chat_template is not recognised (only the ChatML form, <|im_start|>role\\ncontent<|im_end|>, is)",
                  config_path.string());
  detail::require(tok.token_to_id("<|im_start|>").has_value() && tok.token_to_id("<|im_end|>").has_value(), "chat",
                  "{}: the chat_template is ChatML but the tokenizer has no <|im_start|> or <|im_end|> token",
                  config_path.string());
  return ChatTemplate::chatml;
}

/// The prompt of `messages` under `t` (see the file comment).
inline std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages) {
  (void)t;
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

}  // namespace causalqwen::serve
