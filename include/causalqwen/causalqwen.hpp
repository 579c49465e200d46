/// Everything: the Cauchy math, the layers, the model, files, the tokenizer, generation, the
/// optimisers and training: `#include <causalqwen/causalqwen.hpp>`.
#pragma once
#include <causalqwen/checkpoint.hpp>
#include <causalqwen/dist.hpp>
#include <causalqwen/eval.hpp>
#include <causalqwen/format.hpp>
#include <causalqwen/generate.hpp>
#include <causalqwen/model.hpp>
#include <causalqwen/optim.hpp>
#include <causalqwen/text.hpp>
#include <causalqwen/train.hpp>
