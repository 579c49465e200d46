/// Everything a model user needs: `#include <causalqwen/model.hpp>`.
/// (Grows with the library: the Cauchy math now; layers, model, files and text as they land.)
#pragma once
#include <causalqwen/cauchy.hpp>
