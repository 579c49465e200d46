// Text in, text out: numbers become <NUM> with their values kept aligned, and come back either
// exactly as written or as predicted values with their uncertainty.
//
//   tokenize_numbers path/to/tokenizer.json ["some text with 1,234.5 numbers"]
#include <causalqwen/text.hpp>
#include <causalqwen/version.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} tokenizer.json [text]\n", argv[0]);
    return 2;
  }
  const auto tokenizer = cq::text::Tokenizer::from_file(argv[1]);
  const std::string text = argc > 2 ? argv[2] : "The rod is 1,234.5 mm long and weighs -3.2e-1 kg (12.5% less).";

  // Plain ids, as the reference tokenizer gives them.
  const std::vector<cq::text::TokenId> ids = tokenizer.encode(text);
  fmt::print("text      {}\nids       {}\n", text, fmt::join(ids, " "));

  // Numbers: one <NUM> each, value at the same position, spelling kept.
  const auto encoded = tokenizer.encode_with_numbers(text);
  fmt::print("with <NUM> (id {}):\n  ids     {}\n  values  {}\n", tokenizer.num_token_id(),
             fmt::join(encoded.input_ids, " "), fmt::join(encoded.numeric_values, " "));
  for (const auto& span : encoded.spans)
    fmt::print("  number at token {}: \"{}\" = {}\n", span.token_index, span.spelling, span.value);

  // Back to text: exactly as written ...
  fmt::print("round trip  {}\n", tokenizer.decode_with_numbers(encoded.input_ids, encoded.numeric_values,
                                                               {.spans = encoded.spans}));
  // ... or with predicted values (here: the true value times 1.01) and their Cauchy scale.
  std::vector<double> predicted = encoded.numeric_values, scale(encoded.input_ids.size(), 0.0);
  for (const auto& span : encoded.spans) {
    predicted[span.token_index] *= 1.01;
    scale[span.token_index] = 0.05 * std::abs(span.value) + 0.1;
  }
  fmt::print("predicted   {}\n", tokenizer.decode_with_numbers(encoded.input_ids, predicted, {.scales = scale}));
  return 0;
}
