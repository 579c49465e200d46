/// Umbrella header of text generation: the modes, the generation loop with its KV cache, text
/// in and out with numbers rendered back, and the side-by-side mode comparison.
#pragma once
#include <causalqwen/generate/mode_comparison.hpp>
#include <causalqwen/generate/render.hpp>
#include <causalqwen/generate/text_generation.hpp>
#include <causalqwen/generate/generator.hpp>
