/// The byte-level BPE model: a vocabulary of byte strings and a ranked list of merges.
///
/// A word (one pre-token, as raw bytes) starts as one symbol per byte; repeatedly the adjacent
/// pair with the lowest merge rank is merged (ties: the leftmost pair), until no adjacent pair
/// has a merge. This is the order of Hugging Face's BPE and of the reference implementation.
/// Merge ranks live in an open-addressing table keyed on the pair of ids, so one lookup costs
/// one multiply and (usually) one probe.
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/core/json.hpp>
#include <causalqwen/text/byte_level.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace causalqwen::text {

/// Token ids, as in Hugging Face tokenizers (non-negative; −100 marks ignored labels).
using TokenId = std::int32_t;

/// The largest token id a tokenizer.json may give (vocabulary and added tokens alike): far
/// beyond any real vocabulary, and small enough that one more than it (the default <NUM>) and
/// the vocabulary size never wrap in TokenId.
inline constexpr TokenId max_token_id = 50'000'000;

/// Hash table from a pair of token ids to (merge rank, id of the merged token).
class MergeTable {
 public:
  struct Merge {
    std::int32_t rank;
    TokenId merged;
  };

  /// Prepares room for `count` merges (load factor ≤ 1/2).
  void reserve(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < 2 * count) capacity *= 2;
    keys_.assign(capacity, empty_key);
    values_.assign(capacity, Merge{0, 0});
    mask_ = capacity - 1;
    size_ = 0;
  }

  /// Sets the merge of (left, right); a later call for the same pair overwrites it.
  void insert(TokenId left, TokenId right, Merge merge) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    const std::uint64_t key = pack(left, right);
    std::size_t slot = hash(key);
    while (keys_[slot] != empty_key && keys_[slot] != key) slot = (slot + 1) & mask_;
    if (keys_[slot] == empty_key) ++size_;
    keys_[slot] = key;
    values_[slot] = merge;
  }

  /// The merge of (left, right), or nullptr when the pair does not merge.
  const Merge* find(TokenId left, TokenId right) const {
    if (keys_.empty()) return nullptr;
    const std::uint64_t key = pack(left, right);
    for (std::size_t slot = hash(key);; slot = (slot + 1) & mask_) {
      if (keys_[slot] == key) return &values_[slot];
      if (keys_[slot] == empty_key) return nullptr;
    }
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};
  static std::uint64_t pack(TokenId a, TokenId b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }
  std::size_t hash(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
  }
  void grow() {
    std::vector<std::uint64_t> old_keys = std::move(keys_);
    std::vector<Merge> old_values = std::move(values_);
    reserve(old_keys.size());
    for (std::size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != empty_key)
        insert(TokenId(old_keys[i] >> 32), TokenId(old_keys[i] & 0xFFFFFFFFu), old_values[i]);
  }

  std::vector<std::uint64_t> keys_;
  std::vector<Merge> values_;
  std::size_t mask_ = 0, size_ = 0;
};

/// A byte-level BPE vocabulary with its merges.
class BpeModel {
 public:
  /// Builds the model from a tokenizer.json "model" object; `file` names the file in errors.
  /// Accepts merges as "a b" strings or ["a", "b"] pairs; requires the byte-level alphabet
  /// (all 256 single bytes in the vocabulary) and every merge's parts and result in it.
  static BpeModel from_json(const nlohmann::json& model, const std::string& file) {
    const auto fail = [&](const std::string& what) -> FormatError {
      return FormatError(file + ": " + what);
    };
    if (!model.is_object()) throw fail("\"model\" must be an object");
    if (!model.contains("type") || model["type"] != "BPE")
      throw fail("model.type must be \"BPE\" (byte-level BPE), got " +
                 (model.contains("type") ? model["type"].dump() : std::string("nothing")));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() &&
          !(model[key].is_string() && model[key].get<std::string>().empty()))
        throw fail(std::string("model.") + key + " must be empty or null for byte-level BPE, got " +
                   model[key].dump());
    if (model.contains("dropout") && !model["dropout"].is_null() &&
        !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
      throw fail("model.dropout must be null (BPE dropout is not supported), got " +
                 model["dropout"].dump());
    if (model.contains("byte_fallback") && model["byte_fallback"] == true)
      throw fail("model.byte_fallback must be false for byte-level BPE");

    BpeModel m;
    m.ignore_merges_ = json::field_or(model, "ignore_merges", false, file, "model");
    if (!model.contains("vocab") || !model["vocab"].is_object())
      throw fail("model.vocab must be an object mapping tokens to ids");
    const auto& vocab = model["vocab"];
    TokenId max_id = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<std::int64_t>() < 0 ||
          it.value().get<std::int64_t>() > max_token_id)
        throw fail("model.vocab[" + nlohmann::json(it.key()).dump() +
                   fmt::format("] must be an integer id in [0, {}], got ", max_token_id) + it.value().dump());
      max_id = std::max(max_id, it.value().get<TokenId>());
    }
    m.id_to_bytes_.assign(static_cast<std::size_t>(max_id + 1), std::string());
    m.present_.assign(static_cast<std::size_t>(max_id + 1), false);
    m.bytes_to_id_.reserve(vocab.size() * 2);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      std::string bytes;
      char32_t bad = 0;
      if (!byte_level_to_bytes(it.key(), bytes, &bad))
        throw fail("model.vocab: token " + nlohmann::json(it.key()).dump() +
                   (bad ? fmt::format(" contains U+{:04X}, which is not in the byte-level alphabet", std::uint32_t(bad))
                        : std::string(" is not valid UTF-8")));
      const TokenId id = it.value().get<TokenId>();
      if (m.present_[id])
        throw fail(fmt::format("model.vocab: id {} is given to two tokens", id));
      m.present_[id] = true;
      m.id_to_bytes_[id] = bytes;
      m.bytes_to_id_.emplace(std::move(bytes), id);
    }
    for (int b = 0; b < 256; ++b) {
      auto it = m.bytes_to_id_.find(std::string(1, static_cast<char>(b)));
      if (it == m.bytes_to_id_.end())
        throw fail(fmt::format("model.vocab lacks the byte-level token for byte 0x{:02X} ({})", b,
                               nlohmann::json(bytes_to_byte_level(std::string(1, char(b)))).dump()));
      m.byte_id_[b] = it->second;
    }

    if (!model.contains("merges") || !model["merges"].is_array())
      throw fail("model.merges must be an array of \"a b\" strings or [\"a\", \"b\"] pairs");
    const auto& merges = model["merges"];
    m.merges_.reserve(merges.size());
    std::int32_t rank = 0;
    for (const auto& merge : merges) {
      const std::string where = fmt::format("model.merges[{}]", rank);
      std::string left, right;
      if (merge.is_string()) {
        const std::string s = merge.get<std::string>();
        const auto space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          throw fail(where + " must be two tokens separated by one space, got " + merge.dump());
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        left = merge[0].get<std::string>();
        right = merge[1].get<std::string>();
      } else {
        throw fail(where + " must be an \"a b\" string or an [\"a\", \"b\"] pair, got " + merge.dump());
      }
      const TokenId a = m.vocab_id(left, where, file), b = m.vocab_id(right, where, file);
      const TokenId merged = m.vocab_id(left + right, where, file);
      m.merges_.insert(a, b, {rank, merged});
      ++rank;
    }
    return m;
  }

  /// Appends the ids of one word (raw bytes) to `out`, merging as described above.
  void encode_word(std::string_view bytes, std::vector<TokenId>& out) const {
    const std::size_t n = bytes.size();
    if (n == 0) return;
    if (n == 1) {
      out.push_back(byte_id_[static_cast<unsigned char>(bytes[0])]);
      return;
    }
    if (ignore_merges_) {
      auto it = bytes_to_id_.find(std::string(bytes));
      if (it != bytes_to_id_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    Work& w = work();
    w.symbols.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      w.symbols[i] = {byte_id_[static_cast<unsigned char>(bytes[i])], std::int32_t(i) - 1,
                      i + 1 < n ? std::int32_t(i + 1) : -1};
    auto& heap = w.heap;
    heap.clear();
    const auto push = [&](std::int32_t left) {
      const std::int32_t right = w.symbols[left].next;
      if (right < 0) return;
      if (const MergeTable::Merge* m = merges_.find(w.symbols[left].id, w.symbols[right].id)) {
        heap.push_back({m->rank, left, w.symbols[left].id, w.symbols[right].id, m->merged});
        std::push_heap(heap.begin(), heap.end(), Candidate::later);
      }
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(std::int32_t(i));
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), Candidate::later);
      const Candidate c = heap.back();
      heap.pop_back();
      Symbol& left = w.symbols[c.left];
      if (left.id != c.left_id || left.next < 0) continue;  // stale: left merged or removed
      Symbol& right = w.symbols[left.next];
      if (right.id != c.right_id) continue;                 // stale: right merged
      // Merge right into left; `left` keeps its position (its place in tie-breaking).
      left.id = c.merged;
      const std::int32_t after = right.next;
      right.id = -1;
      left.next = after;
      if (after >= 0) w.symbols[after].prev = c.left;
      if (left.prev >= 0) push(left.prev);
      push(c.left);
    }
    for (std::int32_t i = 0; i >= 0; i = w.symbols[i].next) out.push_back(w.symbols[i].id);
  }

  /// The raw bytes of token `id` (empty when the vocabulary has no such id).
  std::string_view token_bytes(TokenId id) const {
    return (id >= 0 && std::size_t(id) < id_to_bytes_.size()) ? std::string_view(id_to_bytes_[id])
                                                               : std::string_view();
  }
  /// True when the vocabulary has a token with this id.
  bool has_id(TokenId id) const {
    return id >= 0 && std::size_t(id) < present_.size() && present_[id];
  }
  /// The id of the token whose raw bytes are `bytes`, if any.
  std::optional<TokenId> token_id(std::string_view bytes) const {
    auto it = bytes_to_id_.find(std::string(bytes));
    if (it == bytes_to_id_.end()) return std::nullopt;
    return it->second;
  }
  /// The largest id in the vocabulary.
  TokenId max_id() const { return TokenId(id_to_bytes_.size()) - 1; }
  /// Number of tokens in the vocabulary and number of merges.
  std::size_t vocab_size() const { return bytes_to_id_.size(); }
  std::size_t merge_count() const { return merges_.size(); }

 private:
  struct Symbol {
    TokenId id;  // −1 once merged into its left neighbour
    std::int32_t prev, next;
  };
  struct Candidate {
    std::int32_t rank, left;
    TokenId left_id, right_id, merged;
    /// Heap order: lowest rank first, then leftmost.
    static bool later(const Candidate& a, const Candidate& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    }
  };
  struct Work {
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };
  static Work& work() {
    thread_local Work w;
    return w;
  }

  TokenId vocab_id(const std::string& token, const std::string& where, const std::string& file) const {
    std::string bytes;
    auto it = bytes_to_id_.end();
    if (byte_level_to_bytes(token, bytes)) it = bytes_to_id_.find(bytes);
    if (it == bytes_to_id_.end())
      throw FormatError(file + ": " + where + ": token " + nlohmann::json(token).dump() +
                        " is not in model.vocab");
    return it->second;
  }

  std::vector<std::string> id_to_bytes_;
  std::vector<bool> present_;
  std::unordered_map<std::string, TokenId> bytes_to_id_;
  std::array<TokenId, 256> byte_id_{};
  MergeTable merges_;
  bool ignore_merges_ = false;
};

}  // namespace causalqwen::text
