/// Umbrella header of text generation: the modes, the generation loop with its KV cache, text
/// in and out with numbers rendered back, and the modes run side by side (compare_modes).
#pragma once
#include <causalqwen/generate/mode_comparison.hpp>
#include <causalqwen/generate/render.hpp>
#include <causalqwen/generate/text_generation.hpp>
#include <causalqwen/generate/generator.hpp>
