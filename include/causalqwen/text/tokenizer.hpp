/// The Qwen2-family tokenizer: a Hugging Face tokenizer.json with an NFC normalizer, a Split
/// (regex) + ByteLevel pre-tokenizer, a byte-level BPE model, a ByteLevel decoder and added
/// tokens; plus the <NUM> token of CausalQwen.
///
///   encode(text):  added tokens are cut out of the raw text first; every other section is
///                  NFC-normalised, split by the regex, and each piece's bytes go through BPE
///                  (with a cache of pieces already seen).
///   decode(ids):   the tokens' bytes, concatenated; byte sequences that are not UTF-8 (a
///                  character cut between tokens) become U+FFFD, as in the reference.
///   encode_with_numbers / decode_with_numbers: see numbers.hpp for what a number is.
///
/// All member functions are const and may run concurrently from several threads (the piece
/// cache is shared under a mutex; regex and BPE scratch space is per thread).
#pragma once
#include <causalqwen/core/error.hpp>
#include <causalqwen/core/json.hpp>
#include <causalqwen/text/added_tokens.hpp>
#include <causalqwen/text/bpe.hpp>
#include <causalqwen/text/normalizer.hpp>
#include <causalqwen/text/numbers.hpp>
#include <causalqwen/text/pretokenizer.hpp>
#include <causalqwen/text/utf8.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace causalqwen::text {

/// Settings that are not in tokenizer.json.
struct TokenizerOptions {
  /// Id of <NUM>; by default the first id after the largest id of the vocabulary and the added
  /// tokens (151665 for Qwen2.5's tokenizer, 151669 for Qwen3's).
  std::optional<TokenId> num_token_id = std::nullopt;
  /// The text decode() writes for <NUM> when no value is given. Plain text never produces
  /// <NUM>: this text is not an added token ("<NUM>" in text is "<", "NUM", ">").
  std::string num_token_text = "<NUM>";
  /// What encode() does with malformed UTF-8.
  InvalidUtf8 invalid_utf8 = InvalidUtf8::error;
  /// Pieces kept in the encode cache (0 disables it); pieces of 256 bytes or more are not cached.
  std::size_t cache_capacity = 1 << 17;
};

/// Options of decode().
struct DecodeOptions {
  bool skip_special_tokens = false;  ///< drop added tokens marked "special"
};

/// A number found by encode_with_numbers.
struct NumberSpan {
  std::size_t token_index = 0;  ///< position of its <NUM> in input_ids
  std::size_t begin = 0, end = 0;  ///< byte span of its spelling in the input text
  std::string spelling;         ///< the text as written, e.g. "1,234.5"
  double value = 0.0;           ///< its value, also at numeric_values[token_index]
};

/// What encode_with_numbers returns: ids with one <NUM> per number, the values aligned with
/// the ids (0 where the token is not <NUM>), and the numbers' spans.
struct NumericEncoding {
  std::vector<TokenId> input_ids;
  std::vector<double> numeric_values;
  std::vector<NumberSpan> spans;
};

/// Options of decode_with_numbers().
struct NumberDecodeOptions {
  /// Original spellings by <NUM> position (from encode_with_numbers): a <NUM> with a span is
  /// written as spelled; others get their value formatted.
  std::span<const NumberSpan> spans = {};
  /// Optional uncertainty per position (e.g. the Cauchy scale of the predicted value): when
  /// given, a formatted value is followed by " (±scale)", as in "42.3 (±1.2)".
  std::span<const double> scales = {};
  NumberFormat value_format{};
  NumberFormat scale_format{2};
  bool skip_special_tokens = false;
};

class Tokenizer {
 public:
  /// Reads a tokenizer.json (json::read_file_text: a read error or a file past 256 MiB is
  /// refused); FormatError names the file and the field at fault.
  static Tokenizer from_file(const std::string& path, TokenizerOptions options = {}) {
    return from_json_text(json::read_file_text(path, "tokenizer file"), path, std::move(options));
  }

  /// Parses tokenizer.json text; `source` names it in errors.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& source,
                                  TokenizerOptions options = {}) {
    return from_json(json::parse(json_text, source), source, std::move(options));
  }

  /// Builds the tokenizer from a parsed tokenizer.json; `source` names it in errors. Token ids
  /// (vocabulary, added tokens, options.num_token_id) must lie in [0, max_token_id].
  static Tokenizer from_json(const nlohmann::json& j, const std::string& source,
                             TokenizerOptions options = {}) {
    return json::guarded(source, [&] { return from_checked_json(j, source, std::move(options)); });
  }

 private:
  static Tokenizer from_checked_json(const nlohmann::json& j, const std::string& source,
                                     TokenizerOptions options) {
    const auto fail = [&](const std::string& what) { return FormatError(source + ": " + what); };
    if (!j.is_object()) throw fail("the top level must be a JSON object");
    if (!j.contains("model")) throw fail("no \"model\" field (expected a BPE model)");
    Tokenizer t;
    t.options_ = options;
    t.model_ = BpeModel::from_json(j["model"], source);
    t.read_normalizer(j, source);
    t.read_pre_tokenizer(j, source);
    t.read_decoder(j, source);
    std::vector<AddedToken> added;
    TokenId max_id = t.model_.max_id();
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) throw fail("added_tokens must be an array");
      std::size_t k = 0;
      for (const auto& a : j["added_tokens"]) {
        const std::string where = fmt::format("added_tokens[{}]", k++);
        if (!a.is_object())
          throw json::field_error(source, where, "an object with an integer \"id\" and a string \"content\"", a);
        AddedToken token;
        const nlohmann::json id = a.contains("id") ? a["id"] : nlohmann::json();
        const bool id_in_range = id.is_number_unsigned()
                                     ? id.get<std::uint64_t>() <= static_cast<std::uint64_t>(max_token_id)
                                     : id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                                           id.get<std::int64_t>() <= max_token_id;
        if (!id_in_range)
          throw json::field_error(source, where + ".id", fmt::format("an integer in [0, {}]", max_token_id), id);
        token.id = static_cast<TokenId>(id.get<std::int64_t>());
        token.content = json::field<std::string>(a, "content", source, where);
        if (token.content.empty()) throw fail(where + ".content must not be empty");
        if (find_invalid_utf8(token.content) != std::string_view::npos)
          throw fail(where + ".content is not valid UTF-8");
        token.special = json::field_or(a, "special", false, source, where);
        token.lstrip = json::field_or(a, "lstrip", false, source, where);
        token.rstrip = json::field_or(a, "rstrip", false, source, where);
        max_id = std::max(max_id, token.id);
        added.push_back(std::move(token));
      }
    }
    t.added_ = AddedTokenMatcher(std::move(added));
    t.num_id_ = options.num_token_id.value_or(max_id + 1);  // max_id ≤ max_token_id: no wrap
    if (t.num_id_ < 0 || t.num_id_ > max_token_id)
      throw DomainError(fmt::format("causalqwen::text::Tokenizer: num_token_id must lie in [0, {}], got {}",
                                    max_token_id, t.num_id_));
    if (t.model_.has_id(t.num_id_) || t.added_.by_id(t.num_id_))
      throw DomainError(fmt::format(
          "causalqwen::text::Tokenizer: num_token_id {} is already a token of {} (the first free id is {})",
          t.num_id_, source, max_id + 1));
    t.size_ = std::max(max_id, t.num_id_) + 1;
    t.cache_ = std::make_unique<Cache>();
    return t;
  }

 public:

  /// Token ids of `text`, exactly as the reference tokenizer's encode(text, {add_special_tokens:
  /// false}) (Qwen2 adds no BOS/EOS). Malformed UTF-8: DomainError naming the byte offset, or
  /// U+FFFD replacement when options.invalid_utf8 is `replace`.
  std::vector<TokenId> encode(std::string_view text) const {
    std::string repaired;
    text = checked_utf8(text, repaired, "encode");
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 4);
    for (const Section& s : added_.split(text)) {
      if (s.token >= 0) ids.push_back(s.token);
      else encode_plain(text.substr(s.begin, s.end - s.begin), ids);
    }
    return ids;
  }

  /// Text of `ids`: the bytes of each token, concatenated, with malformed UTF-8 (a character
  /// cut between tokens) replaced by U+FFFD. <NUM> is written as options.num_token_text.
  /// DomainError for an id that is no token.
  std::string decode(std::span<const TokenId> ids, DecodeOptions options = {}) const {
    std::string bytes;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == num_id_) bytes += options_.num_token_text;
      else append_token(bytes, ids[i], options.skip_special_tokens, i);
    }
    return find_invalid_utf8(bytes) == std::string_view::npos ? bytes : replace_invalid_utf8(bytes);
  }

  /// encode() with every number (numbers.hpp) replaced by one <NUM>: the text around each
  /// number is encoded exactly as if <NUM> were an added token standing in its place.
  NumericEncoding encode_with_numbers(std::string_view text) const {
    std::string repaired;
    text = checked_utf8(text, repaired, "encode_with_numbers");
    NumericEncoding r;
    r.input_ids.reserve(text.size() / 3 + 4);
    const auto pad_values = [&] { r.numeric_values.resize(r.input_ids.size(), 0.0); };
    for (const Section& s : added_.split(text)) {
      if (s.token >= 0) {
        r.input_ids.push_back(s.token);
        continue;
      }
      const std::string_view section = text.substr(s.begin, s.end - s.begin);
      std::size_t previous = 0;
      for (const NumberMatch& m : find_numbers(section)) {
        encode_plain(section.substr(previous, m.begin - previous), r.input_ids);
        pad_values();
        r.spans.push_back({r.input_ids.size(), s.begin + m.begin, s.begin + m.end,
                           std::string(section.substr(m.begin, m.end - m.begin)), m.value});
        r.input_ids.push_back(num_id_);
        r.numeric_values.push_back(m.value);
        previous = m.end;
      }
      encode_plain(section.substr(previous), r.input_ids);
    }
    pad_values();
    return r;
  }

  /// Text of `ids` with numbers written back: a <NUM> at position i is written as its original
  /// spelling when options.spans has one for i (exact round trip of encode_with_numbers), else
  /// as format_number(values[i]), followed by " (±" format_number(scales[i]) ")" when scales
  /// are given. values (and scales, when given) must have one entry per id.
  std::string decode_with_numbers(std::span<const TokenId> ids, std::span<const double> values,
                                  const NumberDecodeOptions& options = {}) const {
    if (values.size() != ids.size())
      throw DomainError(fmt::format("causalqwen::text::Tokenizer::decode_with_numbers: values has {} "
                                    "entries, expected one per id ({})", values.size(), ids.size()));
    if (!options.scales.empty() && options.scales.size() != ids.size())
      throw DomainError(fmt::format("causalqwen::text::Tokenizer::decode_with_numbers: scales has {} "
                                    "entries, expected none or one per id ({})", options.scales.size(), ids.size()));
    std::string bytes;
    std::size_t next_span = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != num_id_) {
        append_token(bytes, ids[i], options.skip_special_tokens, i);
        continue;
      }
      while (next_span < options.spans.size() && options.spans[next_span].token_index < i) ++next_span;
      if (next_span < options.spans.size() && options.spans[next_span].token_index == i) {
        bytes += options.spans[next_span].spelling;
        continue;
      }
      bytes += format_number(values[i], options.value_format);
      if (!options.scales.empty())
        bytes += " (\xC2\xB1" + format_number(options.scales[i], options.scale_format) + ")";
    }
    return find_invalid_utf8(bytes) == std::string_view::npos ? bytes : replace_invalid_utf8(bytes);
  }

  /// Id of <NUM>.
  TokenId num_token_id() const { return num_id_; }
  /// One more than the largest id (vocabulary, added tokens and <NUM>).
  TokenId size() const { return size_; }
  /// The BPE model (vocabulary and merges).
  const BpeModel& model() const { return model_; }
  /// The added tokens.
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  /// Id of the token whose text is `token` (an added token's content, <NUM>'s text, or a
  /// vocabulary token given as its raw bytes), if any.
  std::optional<TokenId> token_to_id(std::string_view token) const {
    for (const auto& a : added_.tokens())
      if (a.content == token) return a.id;
    if (token == options_.num_token_text) return num_id_;
    return model_.token_id(token);
  }

 private:
  struct Cache {
    struct Hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<TokenId>, Hash, std::equal_to<>> pieces;
  };

  Tokenizer() = default;

  std::string_view checked_utf8(std::string_view text, std::string& repaired, const char* fn) const {
    const std::size_t bad = find_invalid_utf8(text);
    if (bad == std::string_view::npos) return text;
    if (options_.invalid_utf8 == InvalidUtf8::error)
      throw DomainError(fmt::format("causalqwen::text::Tokenizer::{}: text is not valid UTF-8 "
                                    "(malformed sequence at byte {}, 0x{:02X})",
                                    fn, bad, static_cast<unsigned char>(text[bad])));
    repaired = replace_invalid_utf8(text);
    return repaired;
  }

  void append_token(std::string& bytes, TokenId id, bool skip_special, std::size_t position) const {
    if (const AddedToken* a = added_.by_id(id)) {
      if (!(skip_special && a->special)) bytes += a->content;
    } else if (model_.has_id(id)) {
      bytes += model_.token_bytes(id);
    } else {
      throw DomainError(fmt::format("causalqwen::text::Tokenizer::decode: ids[{}] = {} is not a token "
                                    "of this tokenizer (ids are 0..{})", position, id, size_ - 1));
    }
  }

  /// Encodes text that holds no added token: NFC, regex pieces, BPE per piece.
  void encode_plain(std::string_view text, std::vector<TokenId>& ids) const {
    if (text.empty()) return;
    std::string normalized;
    if (nfc_ && !is_ascii(text)) {
      normalized = nfc(text);
      text = normalized;
    }
    if (splitters_.empty()) {
      encode_piece(text, ids);
      return;
    }
    split_with(0, text, ids);
  }

  void split_with(std::size_t level, std::string_view text, std::vector<TokenId>& ids) const {
    splitters_[level].split(text, [&](std::size_t b, std::size_t e) {
      if (level + 1 < splitters_.size()) split_with(level + 1, text.substr(b, e - b), ids);
      else encode_piece(text.substr(b, e - b), ids);
    });
  }

  void encode_piece(std::string_view piece, std::vector<TokenId>& ids) const {
    if (piece.size() == 1 || options_.cache_capacity == 0 || piece.size() >= 256) {
      model_.encode_word(piece, ids);
      return;
    }
    {
      std::lock_guard lock(cache_->mutex);
      auto it = cache_->pieces.find(piece);
      if (it != cache_->pieces.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const std::size_t first = ids.size();
    model_.encode_word(piece, ids);
    std::lock_guard lock(cache_->mutex);
    if (cache_->pieces.size() >= options_.cache_capacity) cache_->pieces.clear();
    cache_->pieces.emplace(std::string(piece), std::vector<TokenId>(ids.begin() + first, ids.end()));
  }

  void read_normalizer(const nlohmann::json& j, const std::string& source) {
    if (!j.contains("normalizer") || j["normalizer"].is_null()) return;
    const auto& n = j["normalizer"];
    const auto type = json::field_or<std::string>(n, "type", "", source, "normalizer");
    if (type == "NFC") {
      nfc_ = true;
    } else if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const auto& m : n["normalizers"]) {
        if (json::field_or<std::string>(m, "type", "", source, "normalizer.normalizers[]") != "NFC")
          throw FormatError(source + ": normalizer.normalizers: only NFC is supported, got " + m.dump());
        nfc_ = true;
      }
    } else {
      throw FormatError(source + ": normalizer must be null or of type \"NFC\" (Qwen2 family), got " +
                        n.dump().substr(0, 200));
    }
  }

  void read_pre_tokenizer(const nlohmann::json& j, const std::string& source) {
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      throw FormatError(source + ": pre_tokenizer is missing (expected Split + ByteLevel, or ByteLevel)");
    const auto& p = j["pre_tokenizer"];
    std::vector<std::pair<nlohmann::json, std::string>> steps;
    if (json::field_or<std::string>(p, "type", "", source, "pre_tokenizer") == "Sequence") {
      if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
        throw FormatError(source + ": pre_tokenizer.pretokenizers must be an array");
      for (std::size_t k = 0; k < p["pretokenizers"].size(); ++k)
        steps.emplace_back(p["pretokenizers"][k], fmt::format("pre_tokenizer.pretokenizers[{}]", k));
    } else {
      steps.emplace_back(p, "pre_tokenizer");
    }
    bool byte_level = false;
    for (const auto& [step, where] : steps) {
      const std::string type = json::field_or<std::string>(step, "type", "", source, where);
      if (type == "Split") {
        if (!step.contains("pattern") || !step["pattern"].is_object())
          throw FormatError(source + ": " + where + ".pattern must be {\"Regex\": …} or {\"String\": …}");
        std::string pattern;
        if (step["pattern"].contains("Regex") && step["pattern"]["Regex"].is_string()) {
          pattern = step["pattern"]["Regex"].get<std::string>();
        } else if (step["pattern"].contains("String") && step["pattern"]["String"].is_string()) {
          for (char c : step["pattern"]["String"].get<std::string>()) {  // literal text
            if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) pattern += '\\';
            pattern += c;
          }
        } else {
          throw FormatError(source + ": " + where + ".pattern must hold a string \"Regex\" or \"String\"");
        }
        if (json::field_or<std::string>(step, "behavior", "", source, where) != "Isolated")
          throw FormatError(source + ": " + where + ".behavior must be \"Isolated\" (Qwen2 family), got " +
                            (step.contains("behavior") ? step["behavior"].dump() : std::string("nothing")));
        if (json::field_or(step, "invert", false, source, where))
          throw FormatError(source + ": " + where + ".invert must be false");
        splitters_.emplace_back(pattern, source + ": " + where + ".pattern.Regex");
      } else if (type == "ByteLevel") {
        if (json::field_or(step, "add_prefix_space", false, source, where))
          throw FormatError(source + ": " + where + ".add_prefix_space must be false (Qwen2 family)");
        if (json::field_or(step, "use_regex", true, source, where))  // GPT-2's own split, as the reference runs it
          splitters_.emplace_back(
              R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
              source + ": " + where);
        byte_level = true;
      } else {
        throw FormatError(source + ": " + where + ".type must be \"Split\" or \"ByteLevel\", got " +
                          (step.is_object() && step.contains("type") ? step["type"].dump() : step.dump().substr(0, 200)));
      }
    }
    if (!byte_level)
      throw FormatError(source + ": pre_tokenizer has no ByteLevel step (this tokenizer is byte-level BPE only)");
  }

  void read_decoder(const nlohmann::json& j, const std::string& source) {
    if (!j.contains("decoder") || !j["decoder"].is_object() ||
        json::field_or<std::string>(j["decoder"], "type", "", source, "decoder") != "ByteLevel")
      throw FormatError(source + ": decoder must be of type \"ByteLevel\", got " +
                        (j.contains("decoder") ? j["decoder"].dump().substr(0, 200) : std::string("nothing")));
  }

  TokenizerOptions options_;
  BpeModel model_;
  AddedTokenMatcher added_;
  std::vector<RegexSplitter> splitters_;
  bool nfc_ = false;
  TokenId num_id_ = 0, size_ = 0;
  std::unique_ptr<Cache> cache_;
};

}  // namespace causalqwen::text
