/// Umbrella header of the text layer: the Qwen2 byte-level BPE tokenizer, number recognition
/// and rendering, and batch encoding for training.
#pragma once
#include <causalqwen/version.hpp>  // namespace alias cq
#include <causalqwen/text/added_tokens.hpp>
#include <causalqwen/text/batch.hpp>
#include <causalqwen/text/bpe.hpp>
#include <causalqwen/text/byte_level.hpp>
#include <causalqwen/text/normalizer.hpp>
#include <causalqwen/text/numbers.hpp>
#include <causalqwen/text/pretokenizer.hpp>
#include <causalqwen/text/tokenizer.hpp>
#include <causalqwen/text/utf8.hpp>
