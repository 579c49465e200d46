/// Added tokens (Qwen's <|endoftext|>, <|im_start|>, <think>, …): matched in the raw text
/// before normalisation and pre-tokenisation, as the reference implementation does. At each
/// position the longest added token that starts there wins; scanning then resumes after it.
#pragma once
#include <causalqwen/text/bpe.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace causalqwen::text {

/// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;  ///< dropped by decode(…, {.skip_special_tokens = true})
  bool lstrip = false;   ///< white space before it is removed from the text
  bool rstrip = false;   ///< white space after it is removed from the text
};

/// A piece of text between added tokens, or one added token (`token` ≥ 0).
struct Section {
  std::size_t begin = 0, end = 0;  ///< byte span in the text
  TokenId token = -1;              ///< the added token's id, or −1 for plain text
};

namespace detail {
/// Length of ECMAScript white space (String.prototype.trim's set) at s[i], or 0.
inline std::size_t js_space_length_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  if (i >= s.size()) return 0;
  const unsigned char b = static_cast<unsigned char>(s[i]);
  if (b == ' ' || (b >= '\t' && b <= '\r')) return 1;
  if (b < 0x80) return 0;  // s is well-formed UTF-8 (checked by the caller)
  const char32_t c = next_code_point(s, j);
  const bool space = c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
                     c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
  return space ? j - i : 0;
}
}  // namespace detail

/// Finds added tokens in text.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
    order_.resize(tokens_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      if (!tokens_[i].content.empty()) first_byte_[static_cast<unsigned char>(tokens_[i].content[0])] = true;
      index_.emplace(tokens_[i].id, i);
    }
  }

  /// Cuts `text` into plain sections and added tokens, in order (plain sections may be empty
  /// after lstrip/rstrip trimming; they are then dropped).
  std::vector<Section> split(std::string_view text) const {
    std::vector<Section> sections;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size();) {
      const AddedToken* hit = first_byte_[static_cast<unsigned char>(text[i])] ? match_at(text, i) : nullptr;
      if (!hit) {
        ++i;
        continue;
      }
      if (i > start) sections.push_back({start, i, -1});
      sections.push_back({i, i + hit->content.size(), hit->id});
      i += hit->content.size();
      start = i;
    }
    if (start < text.size()) sections.push_back({start, text.size(), -1});
    // lstrip / rstrip: trim the white space of the neighbouring plain sections.
    for (std::size_t k = 0; k < sections.size(); ++k) {
      if (sections[k].token < 0) continue;
      const AddedToken& t = *by_id(sections[k].token);
      if (t.lstrip && k > 0 && sections[k - 1].token < 0) trim_end(text, sections[k - 1]);
      if (t.rstrip && k + 1 < sections.size() && sections[k + 1].token < 0) trim_start(text, sections[k + 1]);
    }
    std::erase_if(sections, [](const Section& s) { return s.token < 0 && s.begin == s.end; });
    return sections;
  }

  /// The added token with this id, or nullptr.
  const AddedToken* by_id(TokenId id) const {
    auto it = index_.find(id);
    return it == index_.end() ? nullptr : &tokens_[it->second];
  }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  const AddedToken* match_at(std::string_view text, std::size_t i) const {
    for (std::size_t k : order_) {
      const std::string& c = tokens_[k].content;
      if (!c.empty() && text.compare(i, c.size(), c) == 0) return &tokens_[k];
    }
    return nullptr;
  }
  static void trim_start(std::string_view text, Section& s) {
    while (s.begin < s.end) {
      const std::size_t n = detail::js_space_length_at(text.substr(0, s.end), s.begin);
      if (!n) break;
      s.begin += n;
    }
  }
  static void trim_end(std::string_view text, Section& s) {
    while (s.end > s.begin) {
      std::size_t k = s.end - 1;
      while (k > s.begin && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
      if (detail::js_space_length_at(text.substr(0, s.end), k) != s.end - k) break;
      s.end = k;
    }
  }

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, std::size_t> index_;  // id → index in tokens_
  std::vector<std::size_t> order_;  // indices of tokens_, longest content first
  std::array<bool, 256> first_byte_{};
};

}  // namespace causalqwen::text
