// causalqwen tokenize --tokenizer FILE [--numbers]
//
// Reads JSON-encoded strings from stdin, one per line, and prints one JSON array of token ids
// per line; with --numbers, numbers become <NUM> and each line is {"ids": […], "values": […]}.
// A read error, or a line longer than 64 MiB, is an error naming the line.
//   echo '"x = 1,234.5"' | causalqwen tokenize --tokenizer tokenizer.json --numbers
//   {"ids":[87,284,220,151669],"values":[0.0,0.0,0.0,1234.5]}
#include "command.hpp"

#include <causalqwen/core/line_reader.hpp>
#include <causalqwen/text/tokenizer.hpp>

#include <causalqwen/core/json.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>

namespace {

void run_tokenize(const std::string& tokenizer_path, bool numbers) {
  const auto tokenizer = causalqwen::text::Tokenizer::from_file(tokenizer_path);
  std::string line;
  std::ios::sync_with_stdio(false);
  causalqwen::LineReader in(stdin, "tokenize: stdin");
  while (in.next(line)) {
    const std::size_t line_number = in.line_number();
    if (line.empty()) continue;
    nlohmann::json input;
    try {
      input = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw causalqwen::DomainError("tokenize: stdin line " + std::to_string(line_number) +
                                    " is not a JSON string: " + causalqwen::json::escaped(e.what()));
    }
    if (!input.is_string())
      throw causalqwen::DomainError("tokenize: stdin line " + std::to_string(line_number) +
                                    " must be a JSON string, got " + std::string(input.type_name()));
    const std::string text = input.get<std::string>();
    if (numbers) {
      const auto encoded = tokenizer.encode_with_numbers(text);
      const nlohmann::json out = {{"ids", encoded.input_ids}, {"values", encoded.numeric_values}};
      std::cout << out.dump() << '\n';
    } else {
      std::cout << nlohmann::json(tokenizer.encode(text)).dump() << '\n';
    }
  }
  std::cout.flush();
}

const cqcli::Registration reg_tokenize{"tokenize", [](CLI::App& app) {
  auto* sub = app.add_subcommand(
      "tokenize", "Tokenize JSON-encoded strings read from stdin (one per line) into token ids");
  auto path = std::make_shared<std::string>();
  auto numbers = std::make_shared<bool>(false);
  sub->add_option("--tokenizer", *path, "Hugging Face tokenizer.json (Qwen2 family)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_flag("--numbers", *numbers,
                "Replace numbers by <NUM> and print {\"ids\": [...], \"values\": [...]}");
  sub->callback([path, numbers] { run_tokenize(*path, *numbers); });
}};

}  // namespace
