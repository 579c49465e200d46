/// AdamW (Loshchilov & Hutter; torch.optim.AdamW's update) over a parameter arena, with the
/// moments in two arenas of the same layout. For step t = 1, 2, … and each trained element:
///   θ ← θ·(1 − lr·wd)                       (decoupled decay; only where rules.decays(slot))
///   m ← β₁m + (1 − β₁)g,   v ← β₂v + (1 − β₂)g²
///   θ ← θ − lr·(m/(1 − β₁ᵗ)) / (√v/√(1 − β₂ᵗ) + ε)
/// Arithmetic per element in double, stored as T. Element-wise only, so the result is the same
/// for any thread count. Frozen slots (see ParamRules) keep their values and moments bit-identical.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/optim/param_rules.hpp"

#include <cmath>
#include <cstdint>
#include <memory>

namespace causalqwen::optim {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

template <class T>
class AdamW {
 public:
  AdamW(std::shared_ptr<const Layout> layout, AdamWConfig config = {}, ParamRules rules = {})
      : cfg_(config), rules_(std::move(rules)), m_(layout), v_(layout) {
    detail::require(cfg_.beta1 >= 0 && cfg_.beta1 < 1 && cfg_.beta2 >= 0 && cfg_.beta2 < 1, "AdamW",
                    "betas must lie in [0, 1), got {} and {}", cfg_.beta1, cfg_.beta2);
    detail::require(cfg_.eps > 0 && cfg_.weight_decay >= 0, "AdamW", "need eps > 0 and weight_decay >= 0");
  }

  const AdamWConfig& config() const { return cfg_; }
  const ParamRules& rules() const { return rules_; }
  /// Steps taken so far (t of the bias corrections).
  std::uint64_t steps() const { return t_; }
  void set_steps(std::uint64_t t) { t_ = t; }
  Arena<T>& first_moment() { return m_; }
  Arena<T>& second_moment() { return v_; }
  const Arena<T>& first_moment() const { return m_; }
  const Arena<T>& second_moment() const { return v_; }

  /// One update of `params` from `grads` with learning rate `lr` (file comment); bumps the
  /// parameters' version (touch) so caches derived from them rebuild.
  void step(Arena<T>& params, const Arena<T>& grads, double lr) {
    detail::require(params.size() == m_.size() && grads.size() == m_.size(), "AdamW::step",
                    "parameter, gradient and moment arenas must share one layout ({} / {} / {} elements)",
                    params.size(), grads.size(), m_.size());
    ++t_;
    const double b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t_));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(t_)));
    const double step_size = lr / bc1;
    for (const auto& s : m_.layout().slots()) {
      if (!rules_.trained(s.name)) continue;
      const double keep = rules_.decays(s.name) ? 1.0 - lr * cfg_.weight_decay : 1.0;
      T* p = params.data() + s.offset;
      const T* g = grads.data() + s.offset;
      T* m = m_.data() + s.offset;
      T* v = v_.data() + s.offset;
      parallel_for(s.size, 4 * s.size, [&](std::size_t i) {
        const double gi = g[i];
        const double mi = b1 * m[i] + (1.0 - b1) * gi;
        const double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        m[i] = static_cast<T>(mi);
        v[i] = static_cast<T>(vi);
        const double denom = std::sqrt(static_cast<double>(v[i])) / bc2_sqrt + eps;
        p[i] = static_cast<T>(static_cast<double>(p[i]) * keep - step_size * static_cast<double>(m[i]) / denom);
      });
    }
    params.touch();
  }

 private:
  AdamWConfig cfg_;
  ParamRules rules_;
  Arena<T> m_, v_;
  std::uint64_t t_ = 0;
};

}  // namespace causalqwen::optim
