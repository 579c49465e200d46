/// A byte-level BPE trainer: builds a small Hugging Face tokenizer.json of the Qwen2 family
/// (NFC normalizer, Split with the Qwen2 regex + ByteLevel pre-tokenizer, byte-level BPE model,
/// ByteLevel decoder, added special tokens) from a corpus, in seconds for a few MB.
///
/// Training, as Hugging Face's BpeTrainer does it:
///   1. Every text is cut as Tokenizer::encode_with_numbers cuts it: special tokens out, then at
///      every number (numbers.hpp), then NFC, then the Qwen2 regex. Numbers are *removed*: at
///      run time each one is a single <NUM> whose value rides beside it, so its digits, sign,
///      decimal point and thousands commas never reach BPE and must not be counted (the Qwen2
///      regex already makes each digit a piece of its own, so digits could not merge anyway;
///      cutting keeps the counted pieces exactly those encode_with_numbers will meet). Digits
///      that stay text ("x2", "v1.2.3", non-ASCII digits) are trained on like any text.
///      Each piece (pre-token) is counted.
///   2. Every distinct piece starts as its bytes (ids 0–255 are the bytes, in byte order).
///   3. Repeatedly the adjacent pair with the highest count (count = Σ over pieces of the
///      piece's frequency × its occurrences of the pair; ties: the smaller (left id, right id))
///      becomes a new token, appended to the merges; only the pieces that hold the pair are
///      rewritten, and the pair counts change by the difference of those pieces' pairs before
///      and after (a max-heap with lazy deletion finds the next best pair).
///   4. Until 256 + new tokens + special tokens = vocab_size, or the best count < min_frequency.
/// The vocabulary is 256 bytes + merged tokens (ids in creation order), then the special tokens
/// as added tokens; Tokenizer gives <NUM> the next id, so tokenizer.size() = vocab_size + 1
/// when the target was reached. Same texts and options → byte-identical file.
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/text/added_tokens.hpp>
#include <causalqwen/text/byte_level.hpp>
#include <causalqwen/text/normalizer.hpp>
#include <causalqwen/text/numbers.hpp>
#include <causalqwen/text/pretokenizer.hpp>
#include <causalqwen/text/tokenizer.hpp>
#include <causalqwen/text/utf8.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace causalqwen::text {

/// The Qwen2 pre-tokenizer regex (tokenizer.json's Split pattern).
inline constexpr std::string_view qwen2_split_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct BpeTrainerOptions {
  /// Target size: 256 byte tokens + merged tokens + special tokens (<NUM> comes on top).
  std::size_t vocab_size = 1024;
  /// A pair seen fewer times than this is never merged (training may stop below vocab_size).
  std::size_t min_frequency = 2;
  /// Added tokens, marked special, with ids after the vocabulary, in this order.
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  /// Cut numbers out before counting (true, the library's behaviour; see the top of this file).
  bool remove_numbers = true;
};

/// What training did.
struct BpeTrainingStats {
  std::size_t texts = 0, pieces = 0, distinct_pieces = 0, merges = 0, vocab_size = 0;
  std::size_t numbers_removed = 0;
};

/// The trained tokenizer: its tokenizer.json (keys in a fixed order) and statistics.
struct TrainedBpe {
  nlohmann::ordered_json json;
  BpeTrainingStats stats;

  /// tokenizer.json's text (2-space indentation), identical for identical training runs.
  std::string text() const { return json.dump(2); }
  /// The trained tokenizer, loaded as Tokenizer::from_json_text would load the file.
  Tokenizer tokenizer(TokenizerOptions options = {}) const {
    return Tokenizer::from_json_text(text(), "trained tokenizer.json", std::move(options));
  }
};

/// Counts pieces from texts (add_text), then trains (train). One instance per corpus.
class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options = {})
      : options_(std::move(options)),
        splitter_(qwen2_split_pattern, "causalqwen::text::BpeTrainer: Qwen2 split pattern") {
    std::vector<AddedToken> added;
    for (std::size_t i = 0; i < options_.special_tokens.size(); ++i) {
      const std::string& s = options_.special_tokens[i];
      if (s.empty() || find_invalid_utf8(s) != std::string_view::npos)
        throw DomainError(fmt::format("causalqwen::text::BpeTrainer: special_tokens[{}] must be "
                                      "non-empty UTF-8", i));
      for (std::size_t j = 0; j < i; ++j)
        if (options_.special_tokens[j] == s)
          throw DomainError(fmt::format("causalqwen::text::BpeTrainer: special_tokens[{}] '{}' repeats special_tokens[{}]: "
                                        "one token cannot have two ids", i, s, j));
      added.push_back({static_cast<TokenId>(i), s, true, false, false});
    }
    specials_ = AddedTokenMatcher(std::move(added));
    const std::size_t floor = 256 + options_.special_tokens.size();
    if (options_.vocab_size < floor)
      throw DomainError(fmt::format("causalqwen::text::BpeTrainer: vocab_size must be ≥ 256 + {} "
                                    "special tokens = {}, got {}",
                                    options_.special_tokens.size(), floor, options_.vocab_size));
  }

  /// Counts the pieces of one text (cut as described at the top of this file). DomainError
  /// for malformed UTF-8.
  void add_text(std::string_view text) {
    const std::size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos)
      throw DomainError(fmt::format("causalqwen::text::BpeTrainer::add_text: text {} is not valid "
                                    "UTF-8 (byte {})", stats_.texts, bad));
    ++stats_.texts;
    for (const Section& s : specials_.split(text)) {
      if (s.token >= 0) continue;
      const std::string_view section = text.substr(s.begin, s.end - s.begin);
      if (!options_.remove_numbers) {
        add_plain(section);
        continue;
      }
      std::size_t previous = 0;
      for (const NumberMatch& m : find_numbers(section)) {
        add_plain(section.substr(previous, m.begin - previous));
        previous = m.end;
        ++stats_.numbers_removed;
      }
      add_plain(section.substr(previous));
    }
  }

  /// Runs the merges and writes the tokenizer (see the top of this file).
  TrainedBpe train() const {
    // Distinct pieces in byte order, so that nothing depends on hash-table order.
    std::vector<const std::pair<const std::string, std::int64_t>*> sorted;
    sorted.reserve(counts_.size());
    for (const auto& entry : counts_) sorted.push_back(&entry);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });

    std::vector<std::vector<TokenId>> words(sorted.size());
    std::vector<std::int64_t> freq(sorted.size());
    for (std::size_t w = 0; w < sorted.size(); ++w) {
      freq[w] = sorted[w]->second;
      for (unsigned char c : sorted[w]->first) words[w].push_back(c);
    }
    std::vector<std::string> token_bytes(256);
    std::unordered_map<std::string, TokenId> bytes_to_id;
    for (int b = 0; b < 256; ++b) {
      token_bytes[b] = std::string(1, static_cast<char>(b));
      bytes_to_id.emplace(token_bytes[b], b);
    }

    std::unordered_map<std::uint64_t, std::int64_t> pair_count;
    std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> pair_words;
    for (std::size_t w = 0; w < words.size(); ++w)
      for (std::size_t i = 0; i + 1 < words[w].size(); ++i) {
        const std::uint64_t key = pack(words[w][i], words[w][i + 1]);
        pair_count[key] += freq[w];
        auto& list = pair_words[key];
        if (list.empty() || list.back() != w) list.push_back(static_cast<std::uint32_t>(w));
      }
    std::vector<Entry> heap;
    heap.reserve(pair_count.size());
    for (const auto& [key, count] : pair_count) heap.push_back({count, key});
    std::make_heap(heap.begin(), heap.end(), Entry::before);

    const std::size_t target_tokens = options_.vocab_size - options_.special_tokens.size();
    std::vector<std::pair<TokenId, TokenId>> merges;
    std::unordered_set<std::uint64_t> merged_pairs;
    std::vector<std::uint64_t> seen_stamp(words.size(), ~std::uint64_t{0});
    std::unordered_map<std::uint64_t, std::int64_t> delta;
    std::vector<TokenId> rewritten;
    std::uint64_t round = 0;
    while (token_bytes.size() < target_tokens && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), Entry::before);
      const Entry top = heap.back();
      heap.pop_back();
      const auto it = pair_count.find(top.key);
      const std::int64_t current = it == pair_count.end() ? 0 : it->second;
      if (current != top.count) {  // stale entry: re-queue with the live count
        if (current > 0) {
          heap.push_back({current, top.key});
          std::push_heap(heap.begin(), heap.end(), Entry::before);
        }
        continue;
      }
      if (current < static_cast<std::int64_t>(std::max<std::size_t>(options_.min_frequency, 1))) break;
      const TokenId left = static_cast<TokenId>(top.key >> 32);
      const TokenId right = static_cast<TokenId>(top.key & 0xFFFFFFFFu);
      std::string bytes = token_bytes[left] + token_bytes[right];
      TokenId merged;
      if (auto found = bytes_to_id.find(bytes); found != bytes_to_id.end()) {
        merged = found->second;  // the same bytes reached by another path: one token
      } else {
        merged = static_cast<TokenId>(token_bytes.size());
        token_bytes.push_back(bytes);
        bytes_to_id.emplace(std::move(bytes), merged);
      }
      if (merged_pairs.insert(top.key).second) merges.emplace_back(left, right);

      ++round;
      delta.clear();
      const std::vector<std::uint32_t> holders = std::move(pair_words[top.key]);
      pair_words.erase(top.key);
      for (const std::uint32_t w : holders) {
        if (seen_stamp[w] == round) continue;
        seen_stamp[w] = round;
        auto& word = words[w];
        rewritten.clear();
        bool changed = false;
        for (std::size_t i = 0; i < word.size(); ++i) {
          if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
            rewritten.push_back(merged);
            ++i;
            changed = true;
          } else {
            rewritten.push_back(word[i]);
          }
        }
        if (!changed) continue;
        for (std::size_t i = 0; i + 1 < word.size(); ++i) delta[pack(word[i], word[i + 1])] -= freq[w];
        for (std::size_t i = 0; i + 1 < rewritten.size(); ++i) {
          const std::uint64_t key = pack(rewritten[i], rewritten[i + 1]);
          delta[key] += freq[w];
          if (rewritten[i] == merged || rewritten[i + 1] == merged) {
            auto& list = pair_words[key];
            if (list.empty() || list.back() != w) list.push_back(w);
          }
        }
        word.swap(rewritten);
      }
      // Apply the changes in key order (the heap's content must not depend on hash order).
      std::vector<std::pair<std::uint64_t, std::int64_t>> changes(delta.begin(), delta.end());
      std::sort(changes.begin(), changes.end());
      for (const auto& [key, d] : changes) {
        if (d == 0) continue;
        std::int64_t& c = pair_count[key];
        c += d;
        if (c <= 0) {
          pair_count.erase(key);
        } else if (d > 0) {
          heap.push_back({c, key});
          std::push_heap(heap.begin(), heap.end(), Entry::before);
        }
      }
    }

    TrainedBpe out;
    out.stats = stats_;
    out.stats.distinct_pieces = counts_.size();
    out.stats.merges = merges.size();
    out.stats.vocab_size = token_bytes.size() + options_.special_tokens.size();
    out.json = to_json(token_bytes, merges);
    return out;
  }

  const BpeTrainingStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::int64_t count;
    std::uint64_t key;
    /// Heap order: highest count on top; among equal counts the smallest (left, right).
    static bool before(const Entry& a, const Entry& b) {
      return a.count != b.count ? a.count < b.count : a.key > b.key;
    }
  };
  static std::uint64_t pack(TokenId a, TokenId b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }

  void add_plain(std::string_view text) {
    if (text.empty()) return;
    std::string normalized;
    if (!is_ascii(text)) {
      normalized = nfc(text);
      text = normalized;
    }
    splitter_.split(text, [&](std::size_t b, std::size_t e) {
      ++stats_.pieces;
      auto it = counts_.find(text.substr(b, e - b));
      if (it == counts_.end()) counts_.emplace(std::string(text.substr(b, e - b)), 1);
      else ++it->second;
    });
  }

  nlohmann::ordered_json to_json(const std::vector<std::string>& token_bytes,
                                 const std::vector<std::pair<TokenId, TokenId>>& merges) const {
    using ojson = nlohmann::ordered_json;
    ojson vocab = ojson::object();
    for (std::size_t id = 0; id < token_bytes.size(); ++id) vocab[bytes_to_byte_level(token_bytes[id])] = id;
    ojson merge_list = ojson::array();
    for (const auto& [l, r] : merges)
      merge_list.push_back(bytes_to_byte_level(token_bytes[l]) + " " + bytes_to_byte_level(token_bytes[r]));
    ojson added = ojson::array();
    for (std::size_t i = 0; i < options_.special_tokens.size(); ++i)
      added.push_back({{"id", token_bytes.size() + i},
                       {"content", options_.special_tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                              {"trim_offsets", false}, {"use_regex", false}};
    ojson j = ojson::object();
    j["version"] = "1.0";
    j["truncation"] = nullptr;
    j["padding"] = nullptr;
    j["added_tokens"] = added;
    j["normalizer"] = {{"type", "NFC"}};
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         ojson::array({ojson{{"type", "Split"},
                             {"pattern", {{"Regex", std::string(qwen2_split_pattern)}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                       byte_level})}};
    j["post_processor"] = byte_level;
    j["decoder"] = byte_level;
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merge_list}};
    return j;
  }

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  BpeTrainerOptions options_;
  RegexSplitter splitter_;
  AddedTokenMatcher specials_;
  std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>> counts_;
  BpeTrainingStats stats_;
};

/// Trains a tokenizer on `texts` in one call: BpeTrainer(options), add_text each, train().
inline TrainedBpe train_bpe(std::span<const std::string> texts, const BpeTrainerOptions& options = {}) {
  BpeTrainer trainer(options);
  for (const auto& t : texts) trainer.add_text(t);
  return trainer.train();
}

}  // namespace causalqwen::text
