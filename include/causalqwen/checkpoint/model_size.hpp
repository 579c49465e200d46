/// How big a model a config.json describes, checked before anything is allocated: a stated
/// limit per size field, and an estimate of the parameter bytes against the memory available.
///
///   parameters ≈ V·H·(tied ? 1 : 2)                          embedding (+ untied lm_head)
///              + L·(H·(N+2·N_kv)·d + 3·(N+2·N_kv)·d/… + H·H + 3·H·F + 2·H)   attention, SwiGLU, norms
///              + H + 2·C·H + K·C + 3·C + K                    final norm, abduction, action heads
///   bytes      = parameters · 4 (float, the smallest element type)
/// The estimate counts parameters only: activations, caches and optimiser moments come on top.
#pragma once
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/model/config.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <string>

namespace causalqwen::checkpoint {

/// The number of parameters of the model `c` describes (formula at the top of this file), in
/// double so that no size can wrap.
inline double estimated_parameter_count(const model::CausalConfig& c) {
  const auto& b = c.backbone;
  const double V = double(b.vocab_size), H = double(b.hidden_size), F = double(b.intermediate_size);
  const double L = double(b.num_layers), d = double(b.head_dim());
  const double qkv = (double(b.num_heads) + 2.0 * double(b.num_kv_heads)) * d;
  const double C = double(c.causal_size), K = double(c.num_classes);
  const double per_layer = H * qkv + qkv + H * H + 3.0 * H * F + 2.0 * H;
  return V * H * (c.tie_word_embeddings ? 1.0 : 2.0) + L * per_layer + H + 2.0 * C * H + K * C + 3.0 * C + K;
}

/// FormatError "<file>: the model would need about N bytes …" when the parameters alone (as
/// float) exceed the memory available now (available_memory(): MemAvailable, else physical).
inline void check_model_fits_memory(const model::CausalConfig& c, const std::string& file) {
  const double bytes = estimated_parameter_count(c) * 4.0;
  const AvailableMemory available = available_memory();
  if (bytes > static_cast<double>(available.bytes))
    throw FormatError(fmt::format("{}: the model would need about {:.0f} bytes for its parameters alone "
                                  "(as float32), more than the {} bytes of {}",
                                  file, bytes, available.bytes,
                                  available.available_now ? "memory available now" : "this machine's physical memory"));
}

}  // namespace causalqwen::checkpoint
