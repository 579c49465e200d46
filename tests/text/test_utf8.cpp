// UTF-8 validation, U+FFFD replacement and the byte-level alphabet.
#include <causalqwen/text/byte_level.hpp>
#include <causalqwen/text/normalizer.hpp>
#include <causalqwen/text/utf8.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>

namespace text = causalqwen::text;
using std::string_view;

TEST_CASE("find_invalid_utf8 accepts well-formed text and points at the first bad byte") {
  CHECK(text::find_invalid_utf8("") == string_view::npos);
  CHECK(text::find_invalid_utf8("plain ascii") == string_view::npos);
  CHECK(text::find_invalid_utf8("中文 é 😀 \xF4\x8F\xBF\xBF") == string_view::npos);  // U+10FFFF
  CHECK(text::find_invalid_utf8("ab\x80") == 2);              // stray continuation byte
  CHECK(text::find_invalid_utf8("a\xC0\xAF") == 1);           // overlong '/'
  CHECK(text::find_invalid_utf8("\xE0\x80\xAF") == 0);        // overlong, 3 bytes
  CHECK(text::find_invalid_utf8("x\xED\xA0\x80") == 1);       // surrogate U+D800
  CHECK(text::find_invalid_utf8("\xF4\x90\x80\x80") == 0);    // above U+10FFFF
  CHECK(text::find_invalid_utf8("ok\xE4\xB8") == 2);          // truncated at the end
  CHECK(text::find_invalid_utf8("\xFF") == 0);
}

TEST_CASE("replace_invalid_utf8 replaces each maximal ill-formed subpart by one U+FFFD") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(text::replace_invalid_utf8("abc") == "abc");
  CHECK(text::replace_invalid_utf8("a\x80" "b") == "a" + fffd + "b");
  CHECK(text::replace_invalid_utf8("\xE4\xB8" "x") == fffd + "x");           // one subpart
  CHECK(text::replace_invalid_utf8("\xC0\xAF") == fffd + fffd);              // C0 never starts one
  CHECK(text::replace_invalid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);   // surrogate: three
  CHECK(text::replace_invalid_utf8("\xF0\x9F\x98") == fffd);                 // cut emoji
  CHECK(text::find_invalid_utf8(text::replace_invalid_utf8("\xFF\xFE\x80\xC2")) == string_view::npos);
}

TEST_CASE("code points step forwards and backwards") {
  const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
  std::size_t i = 0;
  CHECK(text::next_code_point(s, i) == U'a');
  CHECK(text::next_code_point(s, i) == U'\u00E9');
  CHECK(text::next_code_point(s, i) == U'\u4E2D');
  CHECK(text::next_code_point(s, i) == U'\U0001F600');
  CHECK(i == s.size());
  CHECK(text::previous_code_point(s, s.size()) == U'\U0001F600');
  CHECK(text::previous_code_point(s, 3) == U'\u00E9');
  CHECK(text::previous_code_point(s, 0) == 0);
  std::string round;
  for (char32_t c : {U'a', U'\u00E9', U'\u4E2D', U'\U0001F600'}) text::append_utf8(round, c);
  CHECK(round == s);
}

TEST_CASE("the byte-level alphabet is a bijection on 256 printable code points") {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = text::byte_to_code_point()[b];
    CHECK(text::code_point_to_byte(c) == b);
    seen.insert(c);
  }
  CHECK(seen.size() == 256);
  CHECK(text::byte_to_code_point()[' '] == U'\u0120');   // 'Ġ'
  CHECK(text::byte_to_code_point()['\n'] == U'\u010A');  // 'Ċ'
  CHECK(text::byte_to_code_point()['A'] == U'A');
  CHECK(text::code_point_to_byte(U'\u0200') == -1);
  std::string bytes;
  CHECK(text::byte_level_to_bytes(text::bytes_to_byte_level(std::string("hi \xFF\x00!", 6)), bytes));
  CHECK(bytes == std::string("hi \xFF\x00!", 6));
  char32_t bad = 0;
  bytes.clear();
  CHECK_FALSE(text::byte_level_to_bytes("x\u4E2D", bytes, &bad));
  CHECK(bad == U'\u4E2D');
}

TEST_CASE("nfc composes combining sequences and keeps ASCII") {
  CHECK(text::nfc("abc") == "abc");
  CHECK(text::nfc("e\xCC\x81") == "\xC3\xA9");                       // e + U+0301 → é
  CHECK(text::nfc("\xE2\x84\xAB") == "\xC3\x85");                     // Å sign → Å
  CHECK(text::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // jamo → 각
  CHECK(text::nfc(text::nfc("o\xCC\x88\xCC\x81")) == text::nfc("o\xCC\x88\xCC\x81"));
}
