// format/config_json.hpp: config.json's fields read without a model type — the Qwen2 sizes,
// the defaults of absent keys, <NUM>'s id from the file or the fallback, and the errors naming
// the file and the field; reg_head is taken as a string whatever its value (the model checks it).
#include <causalqwen/format/config_json.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "io_test_support.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace format = causalqwen::format;
namespace cq = causalqwen;
using nlohmann::json;

namespace {

json qwen2_config() {
  return {{"vocab_size", 300},        {"hidden_size", 16},       {"intermediate_size", 32},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4}, {"model_type", "qwen2"}};
}

format::ConfigFields read(const iotest::TempDir& dir, const json& j, std::optional<std::int64_t> fallback = std::nullopt) {
  iotest::write_bytes(dir / "config.json", j.dump());
  return format::read_config_fields(dir / "config.json", fallback);
}

std::string error_of(const iotest::TempDir& dir, const json& j) {
  return cqtest::error_message<cq::FormatError>([&] { (void)read(dir, j); });
}

}  // namespace

TEST_CASE("config.json's fields: the sizes as written, every absent key its default") {
  const iotest::TempDir dir;
  const auto f = read(dir, qwen2_config(), 290);
  CHECK(f.vocab_size == 300);
  CHECK(f.hidden_size == 16);
  CHECK(f.intermediate_size == 32);
  CHECK(f.num_hidden_layers == 2);
  CHECK(f.num_attention_heads == 4);
  CHECK(f.num_key_value_heads == 4);  // num_attention_heads when absent
  CHECK_FALSE(f.max_position_embeddings.has_value());
  CHECK(f.rms_norm_eps == 1e-6);
  CHECK(f.rope_theta == 1e6);
  CHECK_FALSE(f.tie_word_embeddings);
  CHECK(f.causal_size == 16);  // the hidden size when absent
  CHECK(f.num_token_id == 290);
  CHECK_FALSE(f.has_num_token_id);
  CHECK(f.num_classes == 291);  // num_token_id + 1
  CHECK(f.gamma_init == 10.0);
  CHECK_FALSE(f.ovr_threshold.has_value());
  CHECK_FALSE(f.bce_form.has_value());
  CHECK_FALSE(f.reg_head.has_value());
  CHECK(f.json == qwen2_config());
}

TEST_CASE("config.json's fields: stated CausalQwen keys are read as written") {
  const iotest::TempDir dir;
  json j = qwen2_config();
  j["num_token_id"] = 7;
  j["num_key_value_heads"] = 2;
  j["max_position_embeddings"] = 128;
  j["tie_word_embeddings"] = true;
  j["ovr_threshold"] = json::array({1.0, 2.5});
  j["bce_form"] = "epsilon";
  j["reg_head"] = "laplace";  // not a head the model knows: the fields pass it on as written
  const auto f = read(dir, j);
  CHECK(f.num_token_id == 7);
  CHECK(f.has_num_token_id);
  CHECK(f.num_classes == 8);
  CHECK(f.num_key_value_heads == 2);
  CHECK(f.max_position_embeddings == std::optional<std::size_t>(128));
  CHECK(f.tie_word_embeddings);
  CHECK(f.ovr_threshold == std::optional<std::vector<double>>(std::vector<double>{1.0, 2.5}));
  CHECK(f.bce_form == std::optional<std::string>("epsilon"));
  CHECK(f.reg_head == std::optional<std::string>("laplace"));
}

TEST_CASE("config.json's fields: each error names the file and the field") {
  const iotest::TempDir dir;
  const std::string file = (dir / "config.json").string();
  json j = qwen2_config();
  j["num_token_id"] = 7;
  json bad = j;
  bad.erase("hidden_size");
  CHECK(error_of(dir, bad) == file + ": field 'hidden_size' is missing (an integer in [1, 65536] was expected)");
  bad = j;
  bad["vocab_size"] = 0;
  CHECK(error_of(dir, bad) == file + ": field 'vocab_size' must be an integer in [1, 67108864], got 0");
  bad = j;
  bad["rope_theta"] = "big";
  CHECK(error_of(dir, bad) == file + ": field 'rope_theta' must be a number, got \"big\"");
  bad = j;
  bad["bce_form"] = "exact";
  CHECK(error_of(dir, bad) == file + ": field 'bce_form' must be \"stable\" or \"epsilon\", got \"exact\"");
  bad = j;
  bad["reg_head"] = 1;
  CHECK(error_of(dir, bad) == file + ": field 'reg_head' must be \"cauchy\", \"gaussian\" or \"mse\", got 1");
  bad = j;
  bad["ovr_threshold"] = json::array();
  CHECK(error_of(dir, bad) == file + ": field 'ovr_threshold' must be a number or a non-empty list of numbers, got []");
  bad = j;
  bad["model_type"] = "llama";
  CHECK(error_of(dir, bad) == file + ": field 'model_type' must be \"qwen2\" or \"causalqwen\", got \"llama\"");
  CHECK(error_of(dir, json::array()) == file + ": expected a JSON object at the top level");
  // no num_token_id and no fallback: the file cannot say which id is <NUM>
  CHECK(error_of(dir, qwen2_config()) ==
        file + ": field 'num_token_id' is missing: give <NUM>'s id (the first id after the tokenizer's vocabulary), "
               "or a tokenizer from which to take it");
}
