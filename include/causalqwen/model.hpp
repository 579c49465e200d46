/// Everything a model user needs: `#include <causalqwen/model.hpp>` gives the Cauchy math, the
/// layers, the CausalQwen model, checkpoint and batch files, and the tokenizer.
#pragma once
#include <causalqwen/cauchy.hpp>
#include <causalqwen/io.hpp>
#include <causalqwen/io/batch_json.hpp>
#include <causalqwen/io/model_checkpoint.hpp>
#include <causalqwen/model/causal_qwen.hpp>
#include <causalqwen/model/presets.hpp>
#include <causalqwen/nn.hpp>
#include <causalqwen/text.hpp>
