// causalqwen init --base DIR --out DIR [--num-token-id N] [--tokenizer FILE]
//
// Converts a base Qwen2 checkpoint into a CausalQwen one (the heads' initialisation: W_loc = I,
// b_loc = 0, W_scale = 0, b_scale = softplus⁻¹(γ_init), W_cls = the base lm_head, b_cls = 0, so
// that loc_S starts as the base model's logits) and writes it, with config.json's CausalQwen keys, atomically; copies tokenizer.json along.
#include "command.hpp"
#include "model_loading.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <memory>

namespace {

void run_init(const cqcli::ModelOptions& opts, const std::string& out_dir) {
  auto loaded = opts.load<float>();
  const auto& cfg = loaded.model->config();
  fmt::print("{} {} ({} parameters, K = {} classes, <NUM> = {})\n",
             loaded.converted ? "converted base checkpoint" : "read CausalQwen checkpoint", opts.model_dir,
             loaded.model->layout().count(), cfg.num_classes, cfg.num_token_id);
  causalqwen::io::save_model(out_dir, *loaded.model, loaded.config_json, loaded.lm_head);
  if (auto tok = opts.tokenizer_path()) {
    std::filesystem::copy_file(*tok, std::filesystem::path(out_dir) / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  fmt::print("wrote {}/config.json and {}/model.safetensors\n", out_dir, out_dir);
}

const cqcli::Registration reg{"init", [](CLI::App& app) {
  auto* sub = app.add_subcommand("init", "Convert a base Qwen2 checkpoint into a CausalQwen checkpoint");
  auto opts = std::make_shared<cqcli::ModelOptions>();
  auto out = std::make_shared<std::string>();
  opts->add_to(sub, "--base");
  sub->add_option("--out", *out, "output directory (created if missing)")->required();
  sub->callback([opts, out] { run_init(*opts, *out); });
}};

}  // namespace
