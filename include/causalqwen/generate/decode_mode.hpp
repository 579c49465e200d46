/// The four ways of choosing the next token and their settings, selectable per call. Noise is
/// injected into the individual U (scale noise or location noise), or an individual is drawn
/// from U itself (the causal mode); the compatible mode reads loc_S as a classic LM's logits.
///
///   deterministic  scale noise:  loc_A = loc_U, scale_A = scale_U + |b_noise|;
///                  token = argmax_k P_k (ties: lowest id), number = loc_Y
///   sampling       location noise: loc_A = loc_U + T·|b_noise|·ε, scale_A = scale_U,
///                  ε standard Cauchy per component; token = argmax_k P_k, number = loc_Y under it
///                  (T = 0: the noiseless decision on U itself)
///   causal         an individual: u = loc_U + scale_U·tan(π(ε − ½)), ε ~ U(0,1) per
///                  component; s_k = W_cls,k·u + b_cls,k; token = argmax_k s_k (the
///                  individual's own decision, no threshold; with `subtract_threshold`, argmax_k s_k − C_k, the OvR margin of the
///                  individual: the same token when every class has the same threshold);
///                  number = y = w_reg·u + b_reg
///   compatible     a classic LM over loc_S (loc_A = loc_U): greedy argmax_k loc_S when the
///                  temperature is 0, else a draw from softmax(loc_S / T) after top-k / top-p
///                  (with a checkpoint freshly converted from a base Qwen2, loc_S are the base
///                  logits, so greedy decoding is the base model's); number = loc_Y
///
/// Ids ≥ K (padded embedding rows) are never classes, so never emitted in any mode.
#pragma once
#include "causalqwen/core/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace causalqwen::generate {

enum class GenerationMode { deterministic, sampling, causal, compatible };

/// "deterministic", "sampling", "causal", "compatible".
inline std::string_view mode_name(GenerationMode m) {
  switch (m) {
    case GenerationMode::deterministic: return "deterministic";
    case GenerationMode::sampling: return "sampling";
    case GenerationMode::causal: return "causal";
    case GenerationMode::compatible: return "compatible";
  }
  return "?";
}

/// The mode named `name`; DomainError listing the four names otherwise.
inline GenerationMode parse_mode(std::string_view name) {
  for (auto m : {GenerationMode::deterministic, GenerationMode::sampling, GenerationMode::causal,
                 GenerationMode::compatible})
    if (mode_name(m) == name) return m;
  throw DomainError(fmt::format("causalqwen::parse_mode: unknown mode '{}' (deterministic, sampling, causal, compatible)",
                                name));
}

/// How the next token is chosen.
struct DecodeSettings {
  GenerationMode mode = GenerationMode::deterministic;
  /// sampling: T in loc_U + T·|b_noise|·ε (≥ 0); compatible: softmax temperature (0 = greedy).
  /// Not used by deterministic and causal.
  double temperature = 1.0;
  std::size_t top_k = 0;   // compatible sampling: keep the k largest loc_S (0 = all)
  double top_p = 1.0;      // compatible sampling: smallest set of mass ≥ p (1 = all)
  /// sampling and causal: draw ε once per sequence and keep it for every step (the seeds'
  /// "one individual for the whole sequence"), instead of a fresh ε per step.
  bool shared_noise = false;
  /// causal: argmax_k s_k − C_k instead of argmax_k s_k (see the file comment).
  bool subtract_threshold = false;

  /// DomainError naming the first setting out of range.
  void validate(const char* fn = "DecodeSettings") const {
    detail::require(temperature >= 0, fn, "temperature must be >= 0, got {}", temperature);
    detail::require(top_p > 0 && top_p <= 1, fn, "top_p must lie in (0, 1], got {}", top_p);
  }
};

}  // namespace causalqwen::generate
