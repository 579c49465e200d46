/// Everything: the Cauchy math, the layers, the model, files, the tokenizer, generation, the
/// optimisers and training: `#include <causalqwen/causalqwen.hpp>`.
#pragma once
#include <causalqwen/dist.hpp>
#include <causalqwen/eval.hpp>
#include <causalqwen/generate.hpp>
#include <causalqwen/io.hpp>
#include <causalqwen/io/batch_json.hpp>
#include <causalqwen/io/model_checkpoint.hpp>
#include <causalqwen/model.hpp>
#include <causalqwen/optim.hpp>
#include <causalqwen/text.hpp>
#include <causalqwen/train.hpp>
