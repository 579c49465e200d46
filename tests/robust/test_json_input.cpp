// config.json, batch JSON, JSONL and trainer_state.json from a hostile user: numbers beyond the
// double range, sizes no machine can allocate, values that do not fit the float type, position
// ids and attention masks that make no sense: each is one FormatError naming the file (and the
// line, for JSONL) and the field.
#include <causalqwen/train/batch_json.hpp>
#include <causalqwen/checkpoint/model_config.hpp>
#include <causalqwen/train/jsonl_dataset.hpp>
#include <causalqwen/train/training_state.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "../format/io_test_support.hpp"

#include <filesystem>
#include <fstream>
#include <string>

namespace checkpoint = causalqwen::checkpoint;
namespace train = causalqwen::train;
using causalqwen::FormatError;
using json = nlohmann::json;

namespace {

/// A file holding `content`, in a directory of this process's own removed when the tests end.
std::filesystem::path write_temp(const std::string& name, const std::string& content) {
  static const iotest::TempDir dir;
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

/// The message of the FormatError `read` throws ("" when it throws none).
template <class F>
std::string format_error_of(F&& read) {
  try {
    read();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

json small_config() {
  return {{"vocab_size", 32}, {"hidden_size", 8}, {"intermediate_size", 16}, {"num_hidden_layers", 1},
          {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"num_token_id", 20},
          {"max_position_embeddings", 64}};
}

bool contains(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("config.json: a number beyond the double range names the file") {
  std::string text = small_config().dump();
  text.insert(1, "\"rope_theta\": 1e400, ");
  const auto path = write_temp("config_1e400.json", text);
  const std::string message = format_error_of([&] { (void)checkpoint::read_config_json(path); });
  CHECK(contains(message, path.string()));
}

TEST_CASE("config.json: sizes beyond the stated limit or the machine's memory are refused before allocation") {
  struct Case {
    const char* field;
    double value;
  };
  for (const Case c : {Case{"vocab_size", 0x1p40}, Case{"intermediate_size", 0x1p50},
                       Case{"num_hidden_layers", 0x1p40}, Case{"hidden_size", 0x1p62},
                       Case{"num_attention_heads", 0x1p40}}) {
    CAPTURE(c.field);
    json j = small_config();
    j[c.field] = static_cast<std::uint64_t>(c.value);
    const auto path = write_temp("config_big.json", j.dump());
    const std::string message = format_error_of([&] { (void)checkpoint::read_config_json(path); });
    CHECK(contains(message, path.string()));
    CHECK(contains(message, c.field));
  }
  // within every per-field limit, but together more parameters than any memory holds
  json j = small_config();
  j["vocab_size"] = 1 << 24;
  j["hidden_size"] = 1 << 16;
  j["num_attention_heads"] = 1 << 8;
  j["num_key_value_heads"] = 1 << 8;
  j["causal_size"] = 1 << 16;
  const auto path = write_temp("config_huge.json", j.dump());
  const std::string message = format_error_of([&] { (void)checkpoint::read_config_json(path); });
  CHECK(contains(message, path.string()));
  CHECK(contains(message, "bytes"));
}

TEST_CASE("config.json: max_position_embeddings of the wrong type is refused") {
  json j = small_config();
  j["max_position_embeddings"] = "long";
  const auto path = write_temp("config_maxpos.json", j.dump());
  CHECK(contains(format_error_of([&] { (void)checkpoint::read_config_json(path); }), "max_position_embeddings"));
}

TEST_CASE("config.json: the scale floors are read, written back, and refused when negative") {
  json j = small_config();
  j["scale_U_floor"] = 0.05;
  j["scale_Y_floor"] = 0.5;
  const auto path = write_temp("config_floors.json", j.dump());
  const auto c = checkpoint::read_config_json(path).config;
  CHECK(c.scale_U_floor == 0.05);
  CHECK(c.scale_Y_floor == 0.5);
  const auto back = checkpoint::config_to_json(c);
  CHECK(back["scale_U_floor"] == 0.05);
  CHECK(back["scale_Y_floor"] == 0.5);
  CHECK(checkpoint::read_config_json(write_temp("config_no_floors.json", small_config().dump())).config.scale_Y_floor == 0.0);
  j["scale_Y_floor"] = -0.5;
  const auto bad = write_temp("config_bad_floor.json", j.dump());
  const std::string message = format_error_of([&] { (void)checkpoint::read_config_json(bad); });
  CHECK(contains(message, bad.string()));
  CHECK(contains(message, "scale_Y_floor must be finite and >= 0, got -0.5"));
}

TEST_CASE("config.json: reg_head is read and written back; absent is cauchy; an unknown value names the file and the key") {
  using causalqwen::model::RegHead;
  CHECK(checkpoint::read_config_json(write_temp("config_no_head.json", small_config().dump())).config.reg_head == RegHead::cauchy);
  CHECK(checkpoint::config_to_json(checkpoint::read_config_json(write_temp("config_no_head2.json", small_config().dump())).config)["reg_head"] ==
        "cauchy");
  for (const char* name : {"cauchy", "gaussian", "mse"}) {
    json j = small_config();
    j["reg_head"] = name;
    const auto c = checkpoint::read_config_json(write_temp(std::string("config_head_") + name + ".json", j.dump())).config;
    CHECK(causalqwen::model::reg_head_name(c.reg_head) == name);
    CHECK(checkpoint::config_to_json(c)["reg_head"] == name);
  }
  for (const json& bad : {json("laplace"), json("Gaussian"), json(1), json(nullptr)}) {
    json j = small_config();
    j["reg_head"] = bad;
    const auto path = write_temp("config_bad_head.json", j.dump());
    const std::string message = format_error_of([&] { (void)checkpoint::read_config_json(path); });
    INFO(message);
    CHECK(contains(message, path.string()));
    CHECK(contains(message, "field 'reg_head' must be \"cauchy\", \"gaussian\" or \"mse\", got " + bad.dump()));
  }
}

TEST_CASE("batch JSON: bad numbers, position ids and masks are refused with the field") {
  struct Case {
    const char* name;
    const char* text;
    const char* field;
  };
  const Case cases[] = {
      {"overflow", R"({"input_ids": [[1, 2]], "target_values": [[0, 1e400]]})", ""},
      {"float", R"({"input_ids": [[1, 2]], "numeric_values": [[0, 1e308]]})", "numeric_values"},
      {"float_target", R"({"input_ids": [[1, 2]], "target_values": [[-1e300, 0]]})", "target_values"},
      {"position_huge", R"({"input_ids": [[1, 2]], "position_ids": [[0, 9223372036854775807]]})", "position_ids"},
      {"position_negative", R"({"input_ids": [[1, 2]], "position_ids": [[-1, 0]]})", "position_ids"},
      {"mask_zero", R"({"input_ids": [[1, 2], [3, 4]], "attention_mask": [[1, 1], [0, 0]]})", "attention_mask"},
      {"mask_two", R"({"input_ids": [[1, 2]], "attention_mask": [[1, 2]]})", "attention_mask"},
      {"ids_unsigned", R"({"input_ids": [[1, 18446744073709551615]]})", "input_ids"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto path = write_temp(std::string("batch_") + c.name + ".json", c.text);
    const std::string message = format_error_of([&] { (void)train::read_batch_json<float>(path, 4); });
    CHECK(contains(message, path.string()));
    CHECK(contains(message, c.field));
  }
}

TEST_CASE("JSONL: a number beyond the double range names the file and the line") {
  const auto path = write_temp("overflow.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\", \"n\": 1e400}\n");
  const std::string message = format_error_of([&] { (void)causalqwen::train::read_jsonl_texts(path); });
  CHECK(contains(message, path.string() + ":2"));
}

TEST_CASE("trainer_state.json: a number beyond the double range or a wrong type names the file and field") {
  const json good = {{"format", causalqwen::train::trainer_state_format}, {"step", 1}, {"adam_steps", 1},
                     {"rng", "0"}, {"data", json::object()}, {"tokens_seen", 1.0}, {"seconds", 1.0}};
  std::string text = good.dump();
  text.insert(1, "\"extra\": 1e400, ");
  const auto overflow = write_temp("trainer_state_overflow.json", text);
  CHECK(contains(format_error_of([&] { (void)causalqwen::train::read_trainer_state(overflow); }),
                 overflow.string()));
  json wrong = good;
  wrong["step"] = "one";
  const auto typed = write_temp("trainer_state_type.json", wrong.dump());
  const std::string message = format_error_of([&] { (void)causalqwen::train::read_trainer_state(typed); });
  CHECK(contains(message, typed.string()));
  CHECK(contains(message, "step"));
}
