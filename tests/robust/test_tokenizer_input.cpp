// tokenizer.json from a hostile user: ids beyond the id type, numbers beyond the double range
// and fields of the wrong type are each refused with a FormatError naming the file and field.
#include <causalqwen/text/tokenizer.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace text = causalqwen::text;
using causalqwen::FormatError;
using json = nlohmann::json;

namespace {

/// The smallest byte-level tokenizer.json: byte b has id b, no merges, one added token.
json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[text::bytes_to_byte_level(std::string(1, char(b)))] = b;
  return {{"added_tokens", json::array({{{"id", 256}, {"content", "<|end|>"}, {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

/// The FormatError message of loading `text` as "bad.json" ("" when it loads).
std::string load_error(const std::string& json_text) {
  try {
    (void)text::Tokenizer::from_json_text(json_text, "bad.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("tokenizer.json: an added token id outside [0, max_token_id] is refused, not wrapped") {
  for (const char* id : {"2147483647", "2147483648", "4294967301", "9223372036854775807",
                         "18446744073709551615"}) {
    CAPTURE(id);
    json j = tiny_tokenizer_json();
    std::string s = j.dump();
    const std::string from = "\"id\":256";
    s.replace(s.find(from), from.size(), std::string("\"id\":") + id);
    const std::string message = load_error(s);
    CHECK(message.find("bad.json") != std::string::npos);
    CHECK(message.find("added_tokens[0].id") != std::string::npos);
  }
  json j = tiny_tokenizer_json();
  text::TokenizerOptions options;
  options.num_token_id = 2147483647;
  CHECK_THROWS_AS((void)text::Tokenizer::from_json(j, "t.json", options), causalqwen::DomainError);
}

TEST_CASE("tokenizer.json: a number beyond the double range is a FormatError naming the file") {
  std::string s = tiny_tokenizer_json().dump();
  s.insert(1, "\"extra\": 1e400, ");
  const std::string message = load_error(s);
  CHECK(message.find("bad.json") != std::string::npos);
  CHECK(message.find("1e400") != std::string::npos);
}

TEST_CASE("tokenizer.json: a field of the wrong type names the field") {
  struct Case {
    const char* pointer;
    json value;
    const char* field;
  };
  const Case cases[] = {
      {"/added_tokens/0/special", "yes", "added_tokens[0].special"},
      {"/added_tokens/0/lstrip", 1, "added_tokens[0].lstrip"},
      {"/normalizer", json{{"type", 5}}, "normalizer.type"},
      {"/model/ignore_merges", "yes", "model.ignore_merges"},
      {"/pre_tokenizer/add_prefix_space", "no", "pre_tokenizer.add_prefix_space"},
      {"/pre_tokenizer/use_regex", "no", "pre_tokenizer.use_regex"},
      {"/pre_tokenizer/type", 7, "pre_tokenizer.type"},
      {"/decoder/type", json::array(), "decoder"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.pointer);
    json j = tiny_tokenizer_json();
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string message = load_error(j.dump());
    CHECK(message.find("bad.json") != std::string::npos);
    CHECK(message.find(c.field) != std::string::npos);
  }
}
