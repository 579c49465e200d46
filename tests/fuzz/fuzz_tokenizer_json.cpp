// tokenizer.json text → Tokenizer; when it loads, encode/decode (with numbers) of a fixed text.
#include "fuzz_target.hpp"

#include <causalqwen/text/tokenizer.hpp>

void run_one(std::string_view bytes) {
  cqfuzz::refused_or_ok([&] {
    const auto tok = causalqwen::text::Tokenizer::from_json_text(bytes, "fuzz.json");
    const auto ids = tok.encode("a b 12.5 abc <|end|> 3e5");
    (void)tok.decode(ids);
    const auto enc = tok.encode_with_numbers("x 1,234.5 y -7");
    (void)tok.decode_with_numbers(enc.input_ids, enc.numeric_values);
  });
}
