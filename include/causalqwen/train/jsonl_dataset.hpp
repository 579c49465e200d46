/// A JSONL text data set: one JSON object per line, `{"text": "…"}` (other fields ignored, but
/// for an optional string "group" that read_jsonl_records can keep; blank lines skipped). Errors
/// name the file and the 1-based line: a read error, a line longer than default_max_line_bytes
/// (64 MiB), malformed JSON, a line that is not an object, a missing
/// or non-string "text", invalid UTF-8, a group that is not a string, an empty file.
///
/// load_jsonl_dataset splits the lines by SplitRule (a hash of the text: a text, and every
/// repetition of it, lands on one side only, so train and validation cannot overlap);
/// train_source() tokenizes the training texts with numbers and serves packed or padded
/// batches through CorpusBatchSource (shuffled by epoch with a seeded RNG, exact
/// state()/restore()); validation_batches() gives one ordered pass over the validation texts.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/core/line_reader.hpp"
#include "causalqwen/text/tokenizer.hpp"
#include "causalqwen/text/utf8.hpp"
#include "causalqwen/train/corpus_batch_source.hpp"
#include "causalqwen/train/split.hpp"
#include "causalqwen/train/token_corpus.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace causalqwen::train {

/// The lines of a JSONL file for evaluation: each line's text and its group.
struct JsonlRecords {
  std::vector<std::string> texts;
  std::vector<std::string> groups;  // [texts] when some line has a group (the others: no_group); else empty
  static constexpr const char* no_group = "(none)";
};

/// The `field` string of every line of a JSONL file, in order, and, when `group_field` is not
/// empty, each line's optional string `group_field` (see the top of this file for the errors;
/// a group that is not a string is one more, naming the file and line).
inline JsonlRecords read_jsonl_records(const std::filesystem::path& file, const std::string& field = "text",
                                       const std::string& group_field = "") {
  LineReader in(file, default_max_line_bytes, "JSONL file");
  JsonlRecords records;
  std::vector<std::optional<std::string>> groups;
  bool any_group = false;
  std::string line;
  while (in.next(line)) {
    const std::size_t number = in.line_number();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto at = [&](const std::string& what) {
      return FormatError(fmt::format("{}:{}: {}", file.string(), number, what));
    };
    const nlohmann::json j = json::parse(line, fmt::format("{}:{}", file.string(), number));
    if (!j.is_object()) throw at(fmt::format("expected a JSON object {{\"{}\": \"…\"}}, got {}", field, j.type_name()));
    if (!j.contains(field)) throw at(fmt::format("the object has no \"{}\" field", field));
    if (!j[field].is_string()) throw at(fmt::format("\"{}\" must be a string, got {}", field, j[field].type_name()));
    std::string t = j[field].get<std::string>();
    if (const std::size_t bad = text::find_invalid_utf8(t); bad != std::string::npos)
      throw at(fmt::format("\"{}\" is not valid UTF-8 (byte {})", field, bad));
    records.texts.push_back(std::move(t));
    if (group_field.empty()) continue;
    if (!j.contains(group_field)) {
      groups.emplace_back();
      continue;
    }
    const auto& g = j[group_field];
    if (!g.is_string()) throw at(fmt::format("\"{}\" must be a string, got {}", group_field, g.type_name()));
    groups.push_back(g.get<std::string>());
    any_group = true;
  }
  if (records.texts.empty())
    throw FormatError(fmt::format("{}: the file holds no line {{\"{}\": \"…\"}} (empty data set)", file.string(), field));
  if (any_group)
    for (auto& g : groups) records.groups.push_back(g.value_or(JsonlRecords::no_group));
  return records;
}

/// The "text" strings of a JSONL file, in order (see the top of this file for the errors).
inline std::vector<std::string> read_jsonl_texts(const std::filesystem::path& file,
                                                 const std::string& field = "text") {
  return read_jsonl_records(file, field).texts;
}

/// Writes records as JSONL, one {"text": …} per line, with "group": … when it has groups
/// (read_jsonl_records reads them back).
inline void write_jsonl_records(const std::filesystem::path& file, const JsonlRecords& records) {
  if (!records.groups.empty() && records.groups.size() != records.texts.size())
    throw DomainError(fmt::format("causalqwen::train::write_jsonl_records: {} texts but {} groups", records.texts.size(),
                                  records.groups.size()));
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw FormatError(fmt::format("{}: cannot open the file for writing", file.string()));
  for (std::size_t i = 0; i < records.texts.size(); ++i) {
    nlohmann::json line{{"text", records.texts[i]}};
    if (!records.groups.empty()) line["group"] = records.groups[i];
    out << line.dump() << '\n';
  }
  out.flush();
  if (!out) throw FormatError(fmt::format("{}: write failed", file.string()));
}

/// Writes texts as JSONL, one {"text": …} per line.
inline void write_jsonl_texts(const std::filesystem::path& file, const std::vector<std::string>& texts) {
  write_jsonl_records(file, {texts, {}});
}

/// A JSONL file's texts, split into train and validation.
struct JsonlDataset {
  std::filesystem::path file;
  std::vector<std::string> train, validation;

  /// A training source over the train texts (numbers → <NUM>, each text ending in <|endoftext|>).
  template <class T>
  std::unique_ptr<CorpusBatchSource<T>> train_source(const text::Tokenizer& tokenizer,
                                                     const CorpusBatchOptions& options,
                                                     const CorpusEncodeOptions& encode = {}) const {
    if (train.empty())
      throw DomainError(fmt::format("causalqwen::train::JsonlDataset: {} has no training text after the split",
                                    file.string()));
    return std::make_unique<CorpusBatchSource<T>>(
        std::make_shared<const TokenCorpus>(encode_corpus(tokenizer, train, encode)), options);
  }
  /// One ordered pass over the validation texts (empty when there are none).
  template <class T>
  std::vector<BatchData<T>> validation_batches(const text::Tokenizer& tokenizer, std::size_t batch_size,
                                                   std::size_t seq_len, BatchLayout layout = BatchLayout::padded,
                                                   const CorpusEncodeOptions& encode = {}) const {
    return evaluation_batches<T>(encode_corpus(tokenizer, validation, encode), batch_size, seq_len, layout);
  }
};

/// Reads `file` and splits it by `split` (validation_fraction 0: everything is training).
inline JsonlDataset load_jsonl_dataset(const std::filesystem::path& file, const SplitRule& split = {0.0, "causalqwen"},
                                       const std::string& field = "text") {
  JsonlDataset d;
  d.file = file;
  for (auto& t : read_jsonl_texts(file, field))
    (split.side_of(t) == DataSplit::train ? d.train : d.validation).push_back(std::move(t));
  return d;
}

}  // namespace causalqwen::train
