// causalqwen init --base DIR --out DIR [--num-token-id N] [--tokenizer FILE]
// causalqwen init --preset tiny|small|qwen2.5-0.5b --tokenizer FILE --out DIR [--seed S]
//
// With --base: converts a base Qwen2 checkpoint into a CausalQwen one (the heads' initialisation:
// W_loc = I, b_loc = 0, W_scale = 0, b_scale = softplus⁻¹(γ_init), W_cls = the base lm_head,
// b_cls = 0, so that loc_S starts as the base model's logits) and writes it, with config.json's
// CausalQwen keys, atomically; copies tokenizer.json along.
// With --preset: writes a base Qwen2 checkpoint of that shape with random weights (N(0, 0.02²),
// norms 1; the backbone tensors and the Qwen2 keys only, as a published checkpoint has them) for
// the tokenizer's vocabulary: a stand-in for a downloaded Qwen2 that `train --model` converts.
#include "command.hpp"
#include "model_loading.hpp"

#include <causalqwen/model/presets.hpp>

#include <fmt/core.h>

#include <filesystem>
#include <memory>

namespace {

namespace cq = causalqwen;

struct InitOptions {
  cqcli::ModelOptions model;
  std::string preset, out;
  std::uint64_t seed = 1;
};

void copy_tokenizer(const cqcli::ModelOptions& opts, const std::string& out_dir) {
  if (auto tok = opts.tokenizer_path())
    std::filesystem::copy_file(*tok, std::filesystem::path(out_dir) / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
}

void run_init(const InitOptions& o) {
  if (!o.preset.empty()) {
    const auto tok_path = o.model.tokenizer_path();
    if (!tok_path) throw cq::DomainError("init: --preset needs --tokenizer FILE (its vocabulary sets the embedding rows)");
    const auto tok = cq::text::Tokenizer::from_file(tok_path->string());
    cq::model::CausalQwen<float> model(cq::model::preset_config(o.preset, tok.num_token_id()));
    model.init_random(o.seed);
    std::size_t backbone_parameters = 0;
    for (const auto& slot : model.layout().slots())
      if (slot.name.rfind("causal.", 0) != 0) backbone_parameters += slot.size;
    fmt::print("random base Qwen2 of preset {}: {} backbone parameters, vocabulary {} (seed {})\n", o.preset,
               backbone_parameters, model.config().backbone.vocab_size, o.seed);
    // a published Qwen2 states its position cap: the default one (format::default_max_position_embeddings)
    cq::checkpoint::save_model(o.out, model, {{"max_position_embeddings", cq::format::default_max_position_embeddings}}, {},
                       cq::checkpoint::SavedModel::base_qwen2);
    copy_tokenizer(o.model, o.out);
    fmt::print("wrote {}/config.json and {}/model.safetensors (a base checkpoint: train --model converts it)\n", o.out, o.out);
    return;
  }
  auto loaded = o.model.load<float>();
  const auto& cfg = loaded.model->config();
  fmt::print("{} {} ({} parameters, K = {} classes, <NUM> = {})\n",
             loaded.converted ? "converted base checkpoint" : "read CausalQwen checkpoint", o.model.model_dir,
             loaded.model->layout().count(), cfg.num_classes, cfg.num_token_id);
  cq::checkpoint::save_model(o.out, *loaded.model, loaded.config_json, loaded.lm_head);
  copy_tokenizer(o.model, o.out);
  fmt::print("wrote {}/config.json and {}/model.safetensors\n", o.out, o.out);
}

const cqcli::Registration reg_init{"init", [](CLI::App& app) {
  auto* sub = app.add_subcommand("init", "Convert a base Qwen2 checkpoint into a CausalQwen one, or write a random base "
                                         "Qwen2 of a preset's shape");
  auto o = std::make_shared<InitOptions>();
  auto* base = sub->add_option("--base", o->model.model_dir, "base Qwen2 checkpoint directory to convert")
                   ->check(CLI::ExistingDirectory);
  sub->add_option("--tokenizer", o->model.tokenizer, "tokenizer.json (default: the one in --base)");
  cqcli::add_num_token_id(sub, o->model.num_token_id);
  auto* preset = sub->add_option("--preset", o->preset, "write a random base Qwen2: tiny, small or qwen2.5-0.5b")
                     ->excludes(base);
  cqcli::add_integer(sub, "--seed", o->seed, {0, cqcli::max_seed}, "--preset: seed of the random weights");
  sub->add_option("--out", o->out, "output directory (created if missing)")->required();
  sub->callback([o, base, preset] {
    if (base->count() + preset->count() != 1) throw cq::DomainError("init: give exactly one of --base DIR, --preset NAME");
    run_init(*o);
  });
}};

}  // namespace
