// The model the server tests run: make_serve_model TOKENIZER OUT_DIR writes a random CausalQwen
// of the tiny preset's shape for the tokenizer's vocabulary whose <NUM> is chosen now and then
// (a bias on its class, a regression head that is not tiny) and whose end tokens are never
// chosen (requests run to max_tokens), with the tokenizer beside it and a
// tokenizer_config.json holding a ChatML chat template (the form Qwen2's is recognised as).
#include <causalqwen/checkpoint/model_checkpoint.hpp>
#include <causalqwen/model/presets.hpp>
#include <causalqwen/model/slot_names.hpp>
#include <causalqwen/text/tokenizer.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>

int main(int argc, char** argv) {
  namespace cq = causalqwen;
  namespace cqm = causalqwen::model;
  if (argc != 3) {
    fmt::print(stderr, "usage: make_serve_model TOKENIZER OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path out = argv[2];
  const auto tok = cq::text::Tokenizer::from_file(argv[1]);
  auto cfg = cqm::preset_config("tiny", tok.num_token_id());
  cqm::CausalQwen<float> m(cfg);
  m.init_random(7, 0.3);
  auto& p = m.params();
  std::mt19937_64 rng(8);
  std::normal_distribution<double> n(0.0, 1.0);
  for (auto& w : p.slot_span(cqm::names::reg_w)) w = static_cast<float>(0.5 * n(rng));
  for (auto& w : p.slot_span(cqm::names::cls_w)) w = static_cast<float>(0.3 * n(rng));
  auto cls_b = p.slot_span(cqm::names::cls_b);
  cls_b[static_cast<std::size_t>(tok.num_token_id())] = 2.0f;
  // the end tokens never win, so a request runs to max_tokens unless a stop string ends it
  for (const char* end : {"<|endoftext|>", "<|im_end|>"})
    if (const auto id = tok.token_to_id(end)) cls_b[static_cast<std::size_t>(*id)] = -30.0f;
  p.touch();
  nlohmann::json config = nlohmann::json::object();
  config["max_position_embeddings"] = 4096;
  cq::checkpoint::save_model(out, m, config);
  std::filesystem::copy_file(argv[1], out / "tokenizer.json", std::filesystem::copy_options::overwrite_existing);
  const nlohmann::json tc = {
      {"chat_template",
       "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
      {"eos_token", "<|im_end|>"}};
  std::ofstream(out / "tokenizer_config.json") << tc.dump(2) << "\n";
  fmt::print("wrote {}: vocabulary {}, <NUM> = {}\n", out.string(), cfg.backbone.vocab_size, tok.num_token_id());
  return 0;
}
