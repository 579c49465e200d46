/// Stochastic gradient descent (torch.optim.SGD's update with dampening 0, nesterov off) over a
/// parameter arena, with the momentum buffer in one arena of the same layout. For each step and
/// each trained element:
///   g ← g + wd·θ                            (coupled L2 decay, as torch; only where rules.decays(slot))
///   buf ← μ·buf + g                         (only with momentum μ > 0; buf starts at 0, so step 1 gives buf = g)
///   θ ← θ − lr·buf                          (θ ← θ − lr·g without momentum)
/// Arithmetic per element in double, stored as T. Element-wise only, so the result is the same
/// for any thread count. Frozen slots (see ParamRules) keep their values and buffer bit-identical.
/// Unlike AdamW, the step is proportional to the gradient: a parameter whose gradient is scaled
/// down (e.g. the regression head behind a closed gate: its gradient is proportional to
/// P(<NUM>), near 0 when the OvR threshold lies far above loc_S) moves proportionally less.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/param_rules.hpp"
#include "causalqwen/core/threading.hpp"

#include <cmath>
#include <cstdint>
#include <memory>

namespace causalqwen::optim {

struct SgdConfig {
  double momentum = 0.0, weight_decay = 0.0;
};

template <class T>
class Sgd {
 public:
  Sgd(std::shared_ptr<const Layout> layout, SgdConfig config = {}, ParamRules rules = {})
      : cfg_(config), rules_(std::move(rules)), momentum_buffer_(layout) {
    detail::require(cfg_.momentum >= 0 && cfg_.momentum < 1, "Sgd", "momentum must lie in [0, 1), got {}",
                    cfg_.momentum);
    detail::require(cfg_.weight_decay >= 0, "Sgd", "need weight_decay >= 0, got {}", cfg_.weight_decay);
  }

  const SgdConfig& config() const { return cfg_; }
  const ParamRules& rules() const { return rules_; }
  /// Steps taken so far.
  std::uint64_t steps() const { return steps_taken_; }
  void set_steps(std::uint64_t t) { steps_taken_ = t; }
  /// The momentum buffer (all zero, and never written, when momentum is 0).
  Arena<T>& momentum_buffer() { return momentum_buffer_; }
  const Arena<T>& momentum_buffer() const { return momentum_buffer_; }

  /// One update of `params` from `grads` with learning rate `lr` (file comment); bumps the
  /// parameters' version (touch) so caches derived from them rebuild.
  void step(Arena<T>& params, const Arena<T>& grads, double lr) {
    detail::require(params.size() == momentum_buffer_.size() && grads.size() == momentum_buffer_.size(),
                    "Sgd::step", "parameter, gradient and momentum arenas must share one layout ({} / {} / {} elements)",
                    params.size(), grads.size(), momentum_buffer_.size());
    detail::require(std::isfinite(lr) && lr >= 0, "Sgd::step", "need a finite lr >= 0, got {}", lr);
    ++steps_taken_;
    const double mu = cfg_.momentum;
    const bool use_momentum = mu > 0;
    for (const auto& s : momentum_buffer_.layout().slots()) {
      if (!rules_.trained(s.name)) continue;
      const double decay = rules_.decays(s.name) ? cfg_.weight_decay : 0.0;
      T* p = params.data() + s.offset;
      const T* g = grads.data() + s.offset;
      T* buf = momentum_buffer_.data() + s.offset;
      parallel_for(s.size, 2 * s.size, [&](std::size_t i) {
        double direction = static_cast<double>(g[i]);
        if (decay != 0.0) direction += decay * static_cast<double>(p[i]);
        if (use_momentum) {
          buf[i] = static_cast<T>(mu * static_cast<double>(buf[i]) + direction);
          direction = static_cast<double>(buf[i]);
        }
        p[i] = static_cast<T>(static_cast<double>(p[i]) - lr * direction);
      });
    }
    params.touch();
  }

 private:
  SgdConfig cfg_;
  ParamRules rules_;
  Arena<T> momentum_buffer_;
  std::uint64_t steps_taken_ = 0;
};

}  // namespace causalqwen::optim
