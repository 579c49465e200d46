// The tokenizer on a small hand-made tokenizer.json: BPE merge order, added tokens, <NUM>,
// malformed input and files, numbers in and out, batches.
#include <causalqwen/text.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cq = causalqwen;
namespace text = causalqwen::text;
using causalqwen::DomainError;
using causalqwen::FormatError;
using Ids = std::vector<text::TokenId>;
using json = nlohmann::json;

namespace {
const char* qwen2_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string bl(const std::string& bytes) { return text::bytes_to_byte_level(bytes); }

/// Byte b has id b; merges (in rank order): "b c", "a b", "ab c", "a a", "aa aa", " a";
/// added tokens <|end|> = 300 (special), <x> = 301, <x>y = 302, [R] = 303 (rstrip).
json small_tokenizer_json(bool merges_as_pairs = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, char(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"b", "c"}, {"a", "b"}, {"ab", "c"}, {"a", "a"}, {"aa", "aa"}, {" ", "a"}};
  int id = 256;
  json m = json::array();
  for (const auto& [l, r] : merges) {
    if (!vocab.contains(bl(l + r))) vocab[bl(l + r)] = id++;
    if (merges_as_pairs) m.push_back(json::array({bl(l), bl(r)}));
    else m.push_back(bl(l) + " " + bl(r));
  }
  json added = json::array();
  added.push_back({{"id", 300}, {"content", "<|end|>"}, {"special", true}});
  added.push_back({{"id", 301}, {"content", "<x>"}, {"special", false}});
  added.push_back({{"id", 302}, {"content", "<x>y"}, {"special", false}});
  added.push_back({{"id", 303}, {"content", "[R]"}, {"special", false}, {"rstrip", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             json::array({{{"type", "Split"}, {"pattern", {{"Regex", qwen2_pattern}}},
                           {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

text::Tokenizer small_tokenizer(text::TokenizerOptions options = {}) {
  return text::Tokenizer::from_json(small_tokenizer_json(), "small.json", options);
}

Ids bytes_of(const std::string& s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

/// Runs f, requires it to throw E, and returns the message.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return {};
}
}  // namespace

TEST_CASE("BPE merges by rank, leftmost first, and merges built on merges") {
  const auto tok = small_tokenizer();
  const auto id = [&](const std::string& s) { return tok.model().token_id(s).value(); };
  CHECK(tok.encode("abc") == Ids{'a', id("bc")});           // "b c" outranks "a b"
  CHECK(tok.encode("ab") == Ids{id("ab")});
  CHECK(tok.encode("aaa") == Ids{id("aa"), 'a'});           // leftmost pair first
  CHECK(tok.encode("aaaa") == Ids{id("aaaa")});
  CHECK(tok.encode("aaaaa") == Ids{id("aaaa"), 'a'});
  CHECK(tok.encode(" a b") == Ids{id(" a"), ' ', 'b'});
  CHECK(tok.encode("") == Ids{});
  // Both merge formats give the same model.
  const auto pairs = text::Tokenizer::from_json(small_tokenizer_json(true), "pairs.json");
  for (const std::string s : {"abc abcabc aaaaaaa", "ab ab  aa", "x"}) CHECK(pairs.encode(s) == tok.encode(s));
}

TEST_CASE("added tokens are cut out first, longest match wins, rstrip trims") {
  const auto tok = small_tokenizer();
  Ids expected = bytes_of("hi");
  expected.push_back(300);
  for (auto b : bytes_of("there")) expected.push_back(b);
  CHECK(tok.encode("hi<|end|>there") == expected);
  CHECK(tok.encode("<|end") == bytes_of("<|end"));
  CHECK(tok.encode("<x>y") == Ids{302});
  CHECK(tok.encode("<x>z") == Ids{301, 'z'});
  CHECK(tok.encode("[R]   z") == Ids{303, 'z'});
  CHECK(tok.decode(Ids{'a', 300, 'b'}) == "a<|end|>b");
  CHECK(tok.decode(Ids{'a', 300, 'b'}, {.skip_special_tokens = true}) == "ab");
  CHECK(tok.decode(Ids{301}, {.skip_special_tokens = true}) == "<x>");
}

TEST_CASE("<NUM> takes the first free id, is configurable, and plain text never produces it") {
  const auto tok = small_tokenizer();
  CHECK(tok.num_token_id() == 304);
  CHECK(tok.size() == 305);
  for (const std::string s : {"<NUM>", "< NUM >", "<NUM><NUM>", "3 <NUM> 4"}) {
    const Ids ids = tok.encode(s);
    CHECK(std::find(ids.begin(), ids.end(), tok.num_token_id()) == ids.end());
  }
  CHECK(tok.decode(Ids{'a', 304}) == "a<NUM>");
  CHECK(small_tokenizer({.num_token_id = 400}).num_token_id() == 400);
  const std::string msg = error_of<DomainError>([] { small_tokenizer({.num_token_id = 300}); });
  CHECK(msg.find("already a token") != std::string::npos);
}

TEST_CASE("malformed UTF-8: a clear error by default, U+FFFD with the replace policy") {
  const auto strict = small_tokenizer();
  const std::string bad = "ab\xE4\xB8 cd\xFF";
  const std::string msg = error_of<DomainError>([&] { strict.encode(bad); });
  CHECK(msg.find("not valid UTF-8") != std::string::npos);
  CHECK(msg.find("byte 2") != std::string::npos);
  CHECK_THROWS_AS(strict.encode_with_numbers(bad), DomainError);
  const auto lenient = small_tokenizer({.invalid_utf8 = text::InvalidUtf8::replace});
  CHECK(lenient.encode(bad) == lenient.encode("ab\xEF\xBF\xBD cd\xEF\xBF\xBD"));
  CHECK(lenient.decode(lenient.encode(bad)) == "ab\xEF\xBF\xBD cd\xEF\xBF\xBD");
}

TEST_CASE("decode replaces characters cut between tokens and rejects unknown ids") {
  const auto tok = small_tokenizer();
  const Ids han = tok.encode("\xE4\xB8\xAD");  // three byte tokens
  REQUIRE(han.size() == 3);
  CHECK(tok.decode(Ids{han[0], han[1]}) == "\xEF\xBF\xBD");
  CHECK(tok.decode(han) == "\xE4\xB8\xAD");
  const std::string msg = error_of<DomainError>([&] { tok.decode(Ids{'a', 999}); });
  CHECK(msg.find("ids[1] = 999") != std::string::npos);
  CHECK_THROWS_AS(tok.decode(Ids{-1}), DomainError);
}

TEST_CASE("malformed or truncated tokenizer.json: FormatError naming the file and field") {
  const auto load = [](const std::string& text) { return text::Tokenizer::from_json_text(text, "bad.json"); };
  const auto load_json = [](const json& j) { return text::Tokenizer::from_json(j, "bad.json"); };
  const std::string full = small_tokenizer_json().dump();
  std::string msg = error_of<FormatError>([&] { load(full.substr(0, full.size() / 2)); });
  CHECK(msg.find("bad.json: not valid JSON") != std::string::npos);
  msg = error_of<FormatError>([&] { load("[1, 2]"); });
  CHECK(msg.find("top level") != std::string::npos);

  json j = small_tokenizer_json();
  j.erase("model");
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("\"model\"") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("model.type") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["merges"].push_back(bl("q") + " " + bl("zz"));
  msg = error_of<FormatError>([&] { load_json(j); });
  CHECK(msg.find("model.merges[6]") != std::string::npos);
  CHECK(msg.find("not in model.vocab") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["merges"][0] = "nospace";
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("model.merges[0]") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["vocab"].erase(bl("A"));
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("byte 0x41") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["vocab"]["x"] = "seven";
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("model.vocab[\"x\"]") != std::string::npos);

  j = small_tokenizer_json();
  j["model"]["vocab"]["\xE4\xB8\xAD"] = 999;
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("U+4E2D") != std::string::npos);

  j = small_tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("pre_tokenizer.pretokenizers[0].pattern") !=
        std::string::npos);

  j = small_tokenizer_json();
  j["normalizer"] = {{"type", "NFKD"}};
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("normalizer") != std::string::npos);

  j = small_tokenizer_json();
  j["decoder"] = {{"type", "Metaspace"}};
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("decoder") != std::string::npos);

  j = small_tokenizer_json();
  j["added_tokens"][1] = {{"content", "<y>"}};
  CHECK(error_of<FormatError>([&] { load_json(j); }).find("added_tokens[1]") != std::string::npos);

  CHECK(error_of<FormatError>([] { text::Tokenizer::from_file("/nonexistent/tokenizer.json"); })
            .find("/nonexistent/tokenizer.json") != std::string::npos);
}

TEST_CASE("encode_with_numbers: one <NUM> per number, text around as if <NUM> were an added token") {
  const auto tok = small_tokenizer();
  // A second tokenizer where "<NUM>" is an added token with the same id.
  json j = small_tokenizer_json();
  j["added_tokens"].push_back({{"id", 304}, {"content", "<NUM>"}, {"special", false}});
  const auto with_added = text::Tokenizer::from_json(j, "with_num.json", {.num_token_id = 305});
  const std::vector<std::string> texts = {
      "abc 12 abc", "x=-4.5kg and 1,234,567 items", "2024-01-05 at 12:30", "v1.2.3 3e 1e400",
      "  7  ", "99", "a<|end|>-5<|end|>6", "  (+3.5e-2%)", "no numbers at all"};
  for (const auto& s : texts) {
    const auto e = tok.encode_with_numbers(s);
    std::string replaced;
    std::size_t previous = 0;
    for (const auto& span : e.spans) {
      replaced += s.substr(previous, span.begin - previous) + "<NUM>";
      previous = span.end;
      CHECK(e.input_ids[span.token_index] == tok.num_token_id());
      CHECK(e.numeric_values[span.token_index] == span.value);
      CHECK(s.substr(span.begin, span.end - span.begin) == span.spelling);
    }
    replaced += s.substr(previous);
    INFO(s << " → " << replaced);
    CHECK(e.input_ids == with_added.encode(replaced));
    CHECK(e.numeric_values.size() == e.input_ids.size());
    std::size_t nonzero_or_num = 0;
    for (std::size_t i = 0; i < e.input_ids.size(); ++i)
      if (e.input_ids[i] != tok.num_token_id()) CHECK(e.numeric_values[i] == 0.0);
      else ++nonzero_or_num;
    CHECK(nonzero_or_num == e.spans.size());
    // Exact round trip of the original spelling.
    CHECK(tok.decode_with_numbers(e.input_ids, e.numeric_values, {.spans = e.spans}) == s);
  }
}

TEST_CASE("decode_with_numbers formats predicted values, with optional uncertainty") {
  const auto tok = small_tokenizer();
  const auto e = tok.encode_with_numbers("t=1,234.50s, d=-0.5");
  REQUIRE(e.spans.size() == 2);
  CHECK(tok.decode_with_numbers(e.input_ids, e.numeric_values) == "t=1234.5s, d=-0.5");
  std::vector<double> predicted(e.input_ids.size(), 0.0), scales(e.input_ids.size(), 0.0);
  predicted[e.spans[0].token_index] = 42.3;
  scales[e.spans[0].token_index] = 1.2;
  predicted[e.spans[1].token_index] = 6.02e23;
  scales[e.spans[1].token_index] = 1.234e21;
  CHECK(tok.decode_with_numbers(e.input_ids, predicted, {.scales = scales}) ==
        "t=42.3 (\xC2\xB1" "1.2)s, d=6.02e23 (\xC2\xB1" "1.2e21)");
  // A formatted prediction reads back as the same number.
  const auto again = tok.encode_with_numbers(tok.decode_with_numbers(e.input_ids, predicted));
  REQUIRE(again.spans.size() == 2);
  CHECK(again.spans[0].value == 42.3);
  CHECK(again.spans[1].value == 6.02e23);
  CHECK_THROWS_AS(tok.decode_with_numbers(e.input_ids, std::vector<double>(2)), DomainError);
  CHECK_THROWS_AS(tok.decode_with_numbers(e.input_ids, predicted, {.scales = std::vector<double>(1)}),
                  DomainError);
}

TEST_CASE("encode_batch: padding, masks, next-token labels and target values") {
  const auto tok = small_tokenizer();
  const text::TokenId num = tok.num_token_id();
  const std::vector<std::string> texts = {"a 5 b", "7"};
  const auto batch = text::encode_batch(tok, texts, {.pad_token_id = 0});
  // "a 5 b" → a, " ", <NUM>, " b"→(' ', 'b'): a | ' ' | NUM | ' ' | b
  const Ids row0 = {'a', ' ', num, ' ', 'b'};
  REQUIRE(batch.input_ids.shape()[0] == 2);
  REQUIRE(batch.input_ids.shape()[1] == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(batch.input_ids(0, i) == row0[i]);
    CHECK(batch.attention_mask(0, i) == 1);
    CHECK(batch.labels(0, i) == (i + 1 < 5 ? row0[i + 1] : cq::ignore_index));
  }
  CHECK(batch.numeric_values(0, 2) == 5.0);
  CHECK(batch.target_values(0, 1) == 5.0);  // position 1 predicts <NUM> = 5
  CHECK(batch.target_values(0, 2) == 0.0);
  CHECK(batch.input_ids(1, 0) == num);
  CHECK(batch.numeric_values(1, 0) == 7.0);
  CHECK(batch.labels(1, 0) == cq::ignore_index);  // nothing follows
  for (std::size_t i = 1; i < 5; ++i) {
    CHECK(batch.input_ids(1, i) == 0);
    CHECK(batch.attention_mask(1, i) == 0);
    CHECK(batch.labels(1, i) == cq::ignore_index);
    CHECK(batch.target_values(1, i) == 0.0);
  }
  CHECK(batch.lengths == std::vector<std::size_t>{5, 1});

  // Truncation to 3 keeps <NUM> with its value; the cut position's label is ignored.
  const auto cut = text::encode_batch(tok, texts, {.max_length = 3, .padding = text::Padding::max_length});
  CHECK(cut.input_ids.shape()[1] == 3);
  CHECK(cut.input_ids(0, 2) == num);
  CHECK(cut.numeric_values(0, 2) == 5.0);
  CHECK(cut.labels(0, 1) == num);
  CHECK(cut.target_values(0, 1) == 5.0);
  CHECK(cut.labels(0, 2) == cq::ignore_index);
  CHECK(cut.spans[0].size() == 1);
  CHECK(cut.input_ids(1, 1) == 0);  // no <|endoftext|> in this vocabulary: pad id 0
  const auto cut_b = text::encode_batch(tok, std::vector<std::string>{"1 2 3 4"}, {.max_length = 4});
  CHECK(cut_b.spans[0].size() == 2);
  CHECK_THROWS_AS(text::encode_batch(tok, texts, {.max_length = 3, .truncation = false}), DomainError);

  // Left padding moves the real tokens (and spans) to the end.
  const auto left = text::encode_batch(tok, texts, {.padding_side = cq::PaddingSide::left});
  CHECK(left.input_ids(1, 4) == num);
  CHECK(left.numeric_values(1, 4) == 7.0);
  CHECK(left.attention_mask(1, 3) == 0);
  CHECK(left.spans[1][0].token_index == 4);
}
