// The real Qwen tokenizer.json against the reference JavaScript implementation: ids and
// decoded text identical on the corpus (reference_ids.jsonl, written by reference_ids.js in the
// fixture set-up), decode(encode(x)) == NFC(x), the number round trip, and random inputs.
#include <causalqwen/text.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace text = causalqwen::text;
using Ids = std::vector<text::TokenId>;

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) FAIL("environment variable " << name << " is not set (run through ctest)");
  return v;
}

const text::Tokenizer& qwen() {
  static const text::Tokenizer tok = text::Tokenizer::from_file(env("CQ_TOKENIZER_JSON"));
  return tok;
}

struct Reference {
  std::string text, decoded, decoded_half;
  Ids ids;
};

const std::vector<Reference>& reference() {
  static const std::vector<Reference> refs = [] {
    std::vector<Reference> out;
    std::ifstream in(env("CQ_TEXT_REFERENCE"));
    REQUIRE_MESSAGE(in.good(), "cannot read " << env("CQ_TEXT_REFERENCE"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      out.push_back({j["text"].get<std::string>(), j["decoded"].get<std::string>(),
                     j["decoded_half"].get<std::string>(), j["ids"].get<Ids>()});
    }
    return out;
  }();
  return refs;
}
}  // namespace

TEST_CASE("the Qwen tokenizer loads: vocabulary, merges, added tokens, <NUM> id") {
  const auto& tok = qwen();
  CHECK(tok.model().vocab_size() == 151643);
  CHECK(tok.model().merge_count() == 151387);
  CHECK(tok.added_tokens().size() == 26);
  CHECK(tok.token_to_id("<|endoftext|>") == 151643);
  CHECK(tok.num_token_id() == 151669);  // Qwen3's file: 26 added tokens end at 151668
}

TEST_CASE("ids and decoded text identical to the reference on the whole corpus") {
  const auto& refs = reference();
  REQUIRE(refs.size() >= 70);
  std::size_t mismatches = 0, tokens = 0;
  for (const auto& r : refs) {
    const Ids ids = qwen().encode(r.text);
    tokens += ids.size();
    if (ids != r.ids) {
      ++mismatches;
      std::size_t k = 0;
      while (k < ids.size() && k < r.ids.size() && ids[k] == r.ids[k]) ++k;
      MESSAGE("mismatch at token " << k << " of " << nlohmann::json(r.text).dump().substr(0, 300));
    }
    CHECK(qwen().decode(r.ids) == r.decoded);
    const Ids half(r.ids.begin(), r.ids.begin() + static_cast<std::ptrdiff_t>((r.ids.size() + 1) / 2));
    CHECK(qwen().decode(half) == r.decoded_half);
  }
  MESSAGE(refs.size() << " texts, " << tokens << " tokens compared");
  CHECK(mismatches == 0);
}

TEST_CASE("decode(encode(x)) == NFC(x) and the number round trip is exact") {
  const auto& tok = qwen();
  for (const auto& r : reference()) {
    const std::string x = text::nfc(r.text);
    INFO(nlohmann::json(r.text).dump().substr(0, 200));
    CHECK(tok.decode(tok.encode(x)) == x);
    const auto e = tok.encode_with_numbers(x);
    CHECK(tok.decode_with_numbers(e.input_ids, e.numeric_values, {.spans = e.spans}) == x);
    for (const auto& s : e.spans) CHECK(x.substr(s.begin, s.end - s.begin) == s.spelling);
  }
  const auto e = tok.encode_with_numbers("Scientific: 6.02e23 1E-9, thousands 1,234,567, -3.5%");
  std::vector<double> values;
  for (const auto& s : e.spans) values.push_back(s.value);
  CHECK(values == std::vector<double>{6.02e23, 1e-9, 1234567.0, -3.5});
}

TEST_CASE("numbers: the text around them encodes as if <NUM> were an added token") {
  // The same file with "<NUM>" added as a token at the <NUM> id.
  std::ifstream in(env("CQ_TOKENIZER_JSON"));
  auto j = nlohmann::json::parse(in);
  j["added_tokens"].push_back({{"id", qwen().num_token_id()}, {"content", "<NUM>"}, {"special", false}});
  const auto with_added =
      text::Tokenizer::from_json(j, "tokenizer.json + <NUM>", {.num_token_id = qwen().num_token_id() + 1});
  for (const auto& r : reference()) {
    if (r.text.find("<NUM>") != std::string::npos) continue;  // literal "<NUM>" is plain text
    const auto e = qwen().encode_with_numbers(r.text);
    std::string replaced;
    std::size_t previous = 0;
    for (const auto& s : e.spans) {
      replaced += r.text.substr(previous, s.begin - previous) + "<NUM>";
      previous = s.end;
    }
    replaced += r.text.substr(previous);
    INFO(nlohmann::json(replaced).dump().substr(0, 200));
    CHECK(e.input_ids == with_added.encode(replaced));
  }
}

TEST_CASE("random text: never crashes, round-trips, malformed bytes are reported or replaced") {
  const unsigned seed = std::random_device{}();
  MESSAGE("random tokenizer input seed = " << seed);
  std::mt19937 rng(seed);
  const std::vector<char32_t> alphabet = {U'a', U'Z', U' ', U'\n', U'\t', U'\r', U'0', U'7', U'.', U',',
                                          U'-', U'+', U'e', U'\'', U's', U'%', U'\u00E9', U'\u0301',
                                          U'\u4E2D', U'\u3042', U'\uAC00', U'\u0416', U'\u00A0',
                                          U'\u200B', U'\uFEFF', U'\U0001F600', U'\U0001F3FD', U'<', U'|',
                                          U'>', U'\u2028', U'\u0085'};
  const auto lenient = text::Tokenizer::from_file(env("CQ_TOKENIZER_JSON"),
                                                  {.invalid_utf8 = text::InvalidUtf8::replace});
  for (int k = 0; k < 300; ++k) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) text::append_utf8(s, alphabet[rng() % alphabet.size()]);
    if (k % 3 == 0) s += "<|im_end|>";
    INFO("seed " << seed << " case " << k << ": " << nlohmann::json(s).dump());
    const std::string x = text::nfc(s);
    CHECK(qwen().decode(qwen().encode(x)) == x);
    const auto e = qwen().encode_with_numbers(x);
    CHECK(qwen().decode_with_numbers(e.input_ids, e.numeric_values, {.spans = e.spans}) == x);
    // Random bytes: strict mode throws DomainError unless valid, lenient mode never throws.
    std::string bytes;
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(rng() % 256));
    const bool valid = text::find_invalid_utf8(bytes) == std::string_view::npos;
    if (valid) CHECK_NOTHROW(qwen().encode(bytes));
    else CHECK_THROWS_AS(qwen().encode(bytes), causalqwen::DomainError);
    const std::string repaired = text::replace_invalid_utf8(bytes);
    CHECK(lenient.encode(bytes) == qwen().encode(repaired));
  }
}

TEST_CASE("encoding from two threads at once gives the same ids (shared cache, per-thread scratch)") {
  const text::Tokenizer tok = text::Tokenizer::from_file(env("CQ_TOKENIZER_JSON"));
  const auto& refs = reference();
  std::vector<Ids> first(refs.size()), second(refs.size());
  std::thread a([&] { for (std::size_t i = 0; i < refs.size(); ++i) first[i] = tok.encode(refs[i].text); });
  std::thread b([&] { for (std::size_t i = refs.size(); i-- > 0;) second[i] = tok.encode(refs[i].text); });
  a.join();
  b.join();
  for (std::size_t i = 0; i < refs.size(); ++i) {
    CHECK(first[i] == refs[i].ids);
    CHECK(second[i] == refs[i].ids);
  }
}

TEST_CASE("Qwen2.5's layout (22 added tokens, merges as \"a b\" strings, no cache) gives the same ids") {
  std::ifstream in(env("CQ_TOKENIZER_JSON"));
  auto j = nlohmann::json::parse(in);
  // Qwen2.5's tokenizer.json: the same vocabulary and merges, added tokens 151643..151664, and
  // (tokenizers < 0.20) merges written as "a b" strings.
  auto& added = j["added_tokens"];
  added.erase(added.begin() + 22, added.end());
  for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  const auto qwen25 = text::Tokenizer::from_json(j, "qwen2.5-layout.json", {.cache_capacity = 0});
  CHECK(qwen25.num_token_id() == 151665);
  for (const auto& r : reference()) {
    if (r.text.find("<tool_response>") != std::string::npos || r.text.find("think>") != std::string::npos)
      continue;  // Qwen3-only added tokens
    INFO(nlohmann::json(r.text).dump().substr(0, 200));
    CHECK(qwen25.encode(r.text) == r.ids);
  }
}
