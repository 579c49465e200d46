/// Umbrella header of the checkpoint layer (files of a model, above it):
/// `#include <causalqwen/checkpoint.hpp>`.
///
///   model_size.hpp        estimated_parameter_count, check_model_fits_memory: refused before allocating
///   model_config.hpp      read_config_json, write_config_json: config.json as a model::CausalConfig
///   model_checkpoint.hpp  load_model, save_model: a CausalQwen directory, or a base Qwen2 one converted
#pragma once
#include <causalqwen/version.hpp>  // namespace alias cq
#include <causalqwen/checkpoint/model_size.hpp>
#include <causalqwen/checkpoint/model_config.hpp>
#include <causalqwen/checkpoint/model_checkpoint.hpp>
