/// The CausalQwen model: `#include <causalqwen/model.hpp>` gives the Cauchy math, the layers and
/// the model (no files, no tokenizer: see causalqwen.hpp for everything).
#pragma once
#include <causalqwen/cauchy.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/parameter_rules.hpp>
#include <causalqwen/model/presets.hpp>
#include <causalqwen/nn.hpp>
