/// Global-norm gradient clipping over a gradient arena (torch.nn.utils.clip_grad_norm_):
///   ‖g‖ = √(Σ_slots Σ_i g_i²) over the trained slots;  if ‖g‖ > max_norm: g ← g · max_norm/(‖g‖ + 1e-6).
/// The sum is taken in double over fixed blocks of 4096 elements (block sums in parallel, then
/// added in order), so the result does not depend on the number of threads.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/param_rules.hpp"
#include "causalqwen/core/threading.hpp"

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace causalqwen::optim {

/// total += Σ x² over n elements, in double: fixed blocks of 4096 elements, each summed in eight
/// interleaved lanes (vectorisable), the block sums added to `total` in order — the result does
/// not depend on the number of threads. The block sums live in a per-thread buffer that only
/// grows (no allocation in steady state).
template <class T>
void add_sum_of_squares(const T* x, std::size_t n, double& total) {
  constexpr std::size_t block = 4096;
  const std::size_t nb = (n + block - 1) / block;
  thread_local std::vector<double> partial_buffer;
  if (partial_buffer.size() < nb) partial_buffer.resize(nb);
  double* partial = partial_buffer.data();
  parallel_for(nb, n, [&](std::size_t b) {
    const std::size_t begin = b * block, end = std::min(n, begin + block);
    double lane[8] = {};
    std::size_t i = begin;
    for (; i + 8 <= end; i += 8)
      for (std::size_t j = 0; j < 8; ++j) lane[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
    for (; i < end; ++i) lane[(i - begin) & 7] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[b] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  });
  for (std::size_t b = 0; b < nb; ++b) total += partial[b];
}

/// Σ g² over the elements of `owned` in the slots of `layout` that `rules` trains, where
/// owned_grads[i] is the gradient of element owned.begin + i (double, slot by slot in layout
/// order, thread-count independent). One process's part of the squared global norm.
template <class T>
double owned_sum_of_squares(const Layout& layout, std::span<const T> owned_grads, ElementRange owned,
                            const ParamRules& rules = {}) {
  double total = 0;
  for (const auto& s : layout.slots()) {
    const ElementRange r = owned.intersect(s.offset, s.size);
    if (r.size() && rules.trained(s.name)) add_sum_of_squares(owned_grads.data() + (r.begin - owned.begin), r.size(), total);
  }
  return total;
}

/// √(Σ g²) over the slots that `rules` trains (double accumulation, thread-count independent).
template <class T>
double global_grad_norm(const Arena<T>& grads, const ParamRules& rules = {}) {
  return std::sqrt(owned_sum_of_squares(grads.layout(), grads.span(), {0, grads.size()}, rules));
}

/// Multiplies the elements of `owned` in every trained slot by `factor` (owned_grads as in
/// owned_sum_of_squares).
template <class T>
void scale_owned_gradients(const Layout& layout, std::span<T> owned_grads, ElementRange owned, double factor,
                           const ParamRules& rules = {}) {
  const T f = static_cast<T>(factor);
  for (const auto& s : layout.slots()) {
    const ElementRange r = owned.intersect(s.offset, s.size);
    if (!r.size() || !rules.trained(s.name)) continue;
    T* g = owned_grads.data() + (r.begin - owned.begin);
    parallel_for(r.size(), r.size(), [&](std::size_t i) { g[i] *= f; });
  }
}

/// Multiplies every trained slot of `grads` by `factor`.
template <class T>
void scale_gradients(Arena<T>& grads, double factor, const ParamRules& rules = {}) {
  scale_owned_gradients(grads.layout(), grads.span(), {0, grads.size()}, factor, rules);
}

/// The factor clipping multiplies the gradients by: max_norm/(‖g‖ + 1e-6) when ‖g‖ > max_norm,
/// else 1 (also 1 when max_norm ≤ 0 or the norm is not finite, so that a NaN shows in the logs
/// instead of being hidden). Pass it to AdamW::step as grad_scale to clip without a pass.
inline double clip_factor(double norm, double max_norm) {
  return max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

/// Clips to `max_norm` (no clipping when max_norm ≤ 0 or the norm is not finite, so that a
/// NaN shows in the logs instead of being hidden); returns the norm before clipping.
template <class T>
double clip_grad_norm(Arena<T>& grads, double max_norm, const ParamRules& rules = {}) {
  const double norm = global_grad_norm(grads, rules);
  if (const double f = clip_factor(norm, max_norm); f != 1.0) scale_gradients(grads, f, rules);
  return norm;
}

}  // namespace causalqwen::optim
