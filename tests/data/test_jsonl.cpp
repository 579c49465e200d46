// The JSONL data set: errors naming file and line, the split, the training source.
#include "data_test_support.hpp"

#include <causalqwen/train/jsonl_dataset.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

using namespace cqdata;
using causalqwen::FormatError;

namespace {
std::string error_for(const std::string& name, const std::string& content) {
  const auto p = temp_path(name);
  write_file(p, content);
  return cqtest::error_message<FormatError>([&] { tr::read_jsonl_texts(p); });
}
}  // namespace

TEST_CASE("JSONL errors name the file and the line") {
  const std::string ok = "{\"text\": \"a 1\"}\n";
  auto m = error_for("bad_json.jsonl", ok + "\n{\"text\": \"b\"\n");
  CHECK(m.find("bad_json.jsonl:3: not valid JSON") != std::string::npos);
  m = error_for("missing.jsonl", ok + "{\"txt\": \"b\"}\n");
  CHECK(m.find("missing.jsonl:2: the object has no \"text\" field") != std::string::npos);
  m = error_for("not_string.jsonl", "{\"text\": 5}\n");
  CHECK(m.find("not_string.jsonl:1: \"text\" must be a string, got number") != std::string::npos);
  m = error_for("array.jsonl", "[\"text\"]\n");
  CHECK(m.find("array.jsonl:1: expected a JSON object") != std::string::npos);
  m = error_for("empty.jsonl", "");
  CHECK(m.find("empty.jsonl: the file holds no line") != std::string::npos);
  m = error_for("blank.jsonl", "\n  \n\r\n");
  CHECK(m.find("blank.jsonl: the file holds no line") != std::string::npos);
  CHECK(cqtest::error_message<FormatError>([] { tr::read_jsonl_texts(temp_path("does_not_exist.jsonl")); })
            .find("does_not_exist.jsonl: cannot open") != std::string::npos);
}

TEST_CASE("JSONL lines are read in order, with blank lines, CRLF and other fields tolerated") {
  const auto p = temp_path("good.jsonl");
  write_file(p, "{\"text\": \"first 1\", \"id\": 7}\r\n\n{\"text\": \"第二 2\"}\n{\"text\": \"\"}");
  const auto texts = tr::read_jsonl_texts(p);
  REQUIRE(texts.size() == 3);
  CHECK(texts[0] == "first 1");
  CHECK(texts[1] == "第二 2");
  CHECK(texts[2].empty());
  // write_jsonl_texts round-trips, whatever the characters.
  const std::vector<std::string> odd = {"quote \" and \\ and \n newline", "emoji 😀", "tab\t"};
  const auto q = temp_path("roundtrip.jsonl");
  tr::write_jsonl_texts(q, odd);
  CHECK(tr::read_jsonl_texts(q) == odd);
}

TEST_CASE("JSONL records keep each line's group; a group that is not a string names the file and line") {
  const auto p = temp_path("groups.jsonl");
  write_file(p, "{\"text\": \"a 1\", \"group\": \"en\"}\n{\"text\": \"b 2\"}\n\n{\"text\": \"c 3\", \"group\": \"zh\"}\n");
  const auto r = tr::read_jsonl_records(p, "text", "group");
  CHECK(r.texts == std::vector<std::string>{"a 1", "b 2", "c 3"});
  CHECK(r.groups == std::vector<std::string>{"en", tr::JsonlRecords::no_group, "zh"});
  // written back and read again: the same records
  const auto again = temp_path("groups_again.jsonl");
  tr::write_jsonl_records(again, r);
  const auto back = tr::read_jsonl_records(again, "text", "group");
  CHECK(back.texts == r.texts);
  CHECK(back.groups == r.groups);
  // without a group field asked for, or with no line holding one: no groups
  CHECK(tr::read_jsonl_records(p).groups.empty());
  const auto q = temp_path("no_groups.jsonl");
  write_file(q, "{\"text\": \"a 1\"}\n");
  CHECK(tr::read_jsonl_records(q, "text", "group").groups.empty());
  const auto bad = temp_path("bad_group.jsonl");
  write_file(bad, "{\"text\": \"a 1\", \"group\": \"en\"}\n{\"text\": \"b 2\", \"group\": 3}\n");
  CHECK(cqtest::error_message<FormatError>([&] { tr::read_jsonl_records(bad, "text", "group"); })
            .find("bad_group.jsonl:2: \"group\" must be a string, got number") != std::string::npos);
}

TEST_CASE("the split by text hash cannot overlap, even with repeated lines") {
  const auto seed = cqtest::test_seed(41, "jsonl split");
  auto texts = ds::texts_of(ds::synthetic_sentences(tr::DataSplit::train, 3000, seed,
                                                    {ds::SyntheticMix::demo(), {0.0, "none"}}));
  const auto p = temp_path("split.jsonl");
  tr::write_jsonl_texts(p, texts);
  const auto d = tr::load_jsonl_dataset(p, {0.2, "jsonl"});
  CHECK(d.train.size() + d.validation.size() == texts.size());
  const std::set<std::string> train(d.train.begin(), d.train.end());
  for (const auto& v : d.validation) REQUIRE(train.count(v) == 0);
  const double share = double(d.validation.size()) / double(texts.size());
  CHECK(share > 0.1);
  CHECK(share < 0.3);
  const auto all = tr::load_jsonl_dataset(p);
  CHECK(all.validation.empty());
  CHECK(all.train == texts);
}

TEST_CASE("the JSONL training source tokenizes with numbers and resumes exactly") {
  const auto seed = cqtest::test_seed(42, "jsonl source");
  const auto p = temp_path("source.jsonl");
  tr::write_jsonl_texts(p, ds::texts_of(ds::synthetic_sentences(tr::DataSplit::train, 500, seed)));
  const auto d = tr::load_jsonl_dataset(p, {0.1, "s"});
  const auto& tok = synthetic_tokenizer();
  auto source = d.train_source<float>(tok, {.batch_size = 2, .seq_len = 32, .seed = seed});
  std::size_t nums = 0;
  for (int i = 0; i < 5; ++i) {
    const auto b = source->next();
    for (std::size_t k = 0; k < b.labels.size(); ++k)
      if (b.labels[k] == tok.num_token_id()) {
        ++nums;
        if (k + 1 < b.labels.size() && (k + 1) % 32 != 0) REQUIRE(b.target_values[k] == b.numeric_values[k + 1]);
      }
  }
  CHECK(nums > 0);
  const auto state = source->state();
  const auto expected = source->next();
  auto again = d.train_source<float>(tok, {.batch_size = 2, .seq_len = 32, .seed = seed});
  again->restore(state);
  CHECK(again->next().input_ids == expected.input_ids);
  const auto val = d.validation_batches<float>(tok, 8, 48);
  std::size_t rows = 0;
  for (const auto& b : val) rows += b.batch;
  CHECK(rows == d.validation.size());
}
