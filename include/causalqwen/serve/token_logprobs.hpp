/// The log-probabilities the API reports for a decoding step (OpenAI's `logprobs` and
/// `top_logprobs`), from the class scores the step decided with (generate::NextTokenHead):
///   deterministic, sampling   the OvR probabilities of the K classes under the mode's action
///                             distribution, P_k = P(S_k > C_k) = ½ + atan(z_k)/π with the
///                             margin z_k = (loc_S,k − C_k)/scale_S,k, renormalised over the classes:
///                             logprob_k = log P_k − log Σ_j P_j
///                             (the P_k are K separate yes/no probabilities and do not sum to one;
///                             divided by their sum they are a distribution over the next token
///                             whose argmax is the emitted token)
///   compatible                the softmax of the logits loc_S at temperature 1:
///                             logprob_k = loc_S,k − log Σ_j exp(loc_S,j)
///   causal                    none: an individual's scores s_k are no probabilities
/// The top list holds the `top` classes of largest logprob, largest first, ties to the lower id.
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/generate/decode_mode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace causalqwen::serve {

/// One class and its logprob.
struct ClassLogprob {
  std::int64_t token = 0;
  double logprob = 0;
};

/// What a step reports: the emitted token's logprob and the likeliest classes.
struct StepLogprobs {
  bool available = false;          // false in the causal mode (see the file comment)
  double logprob = 0;              // of the emitted token
  std::vector<ClassLogprob> top;   // likeliest first
};

/// The step's logprobs (file comment) for a row's class scores loc_S [K] and, in the
/// deterministic and sampling modes, scale_S [K] and the thresholds C [K]; `token` the emitted
/// class, `top` the length of the top list (at most K).
template <class T>
StepLogprobs step_logprobs(generate::GenerationMode mode, const T* loc_S, const T* scale_S, const T* threshold,
                           std::size_t K, std::int64_t token, std::size_t top, std::vector<double>& work) {
  StepLogprobs out;
  if (mode == generate::GenerationMode::causal || K == 0) return out;
  out.available = true;
  work.resize(K);
  double total = 0;
  if (mode == generate::GenerationMode::compatible) {
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < K; ++k) mx = std::max(mx, static_cast<double>(loc_S[k]));
    for (std::size_t k = 0; k < K; ++k) total += std::exp(static_cast<double>(loc_S[k]) - mx);
    const double log_total = mx + std::log(total);
    for (std::size_t k = 0; k < K; ++k) work[k] = static_cast<double>(loc_S[k]) - log_total;
  } else {
    // log P_k from the margin (accurate far in both tails), then the log of their sum
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < K; ++k) {
      const T margin = (loc_S[k] - threshold[k]) / scale_S[k];  // as the decision forms it
      work[k] = log_cdf(static_cast<double>(margin), 0.0, 1.0);
      mx = std::max(mx, work[k]);
    }
    for (std::size_t k = 0; k < K; ++k) total += std::exp(work[k] - mx);
    const double log_total = mx + std::log(total);
    for (auto& w : work) w -= log_total;
  }
  out.logprob = token >= 0 && static_cast<std::size_t>(token) < K ? work[static_cast<std::size_t>(token)]
                                                                    : std::numeric_limits<double>::quiet_NaN();
  const std::size_t n = std::min(top, K);
  if (n == 0) return out;
  std::vector<std::int64_t> order(K);
  std::iota(order.begin(), order.end(), std::int64_t{0});
  auto higher = [&](std::int64_t a, std::int64_t b) {
    const double la = work[static_cast<std::size_t>(a)], lb = work[static_cast<std::size_t>(b)];
    if (std::isnan(la) != std::isnan(lb)) return std::isnan(lb);
    return la > lb || (!(lb > la) && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), higher);
  for (std::size_t i = 0; i < n; ++i) out.top.push_back({order[i], work[static_cast<std::size_t>(order[i])]});
  return out;
}

}  // namespace causalqwen::serve
