/// AdamW (Loshchilov & Hutter; torch.optim.AdamW's update) over a parameter arena, with the
/// moments in two arenas of the same layout. For step t = 1, 2, … and each trained element:
///   θ ← θ·(1 − lr·wd)                       (decoupled decay; only where rules.decays(slot))
///   m ← β₁m + (1 − β₁)g,   v ← β₂v + (1 − β₂)g²
///   θ ← θ − lr·(m/(1 − β₁ᵗ)) / (√v/√(1 − β₂ᵗ) + ε)
/// with g = grad·grad_scale (the clipping factor, applied on the fly: the same T product that
/// scale_gradients would store, without a separate pass over the gradients).
/// Arithmetic per element in T, in the order of torch.optim.AdamW's update for T tensors (float
/// arithmetic for float, as PyTorch does; in double the sqrt and division of every element make
/// the update compute-bound). Element-wise only, so the result
/// is the same for any thread count. Frozen slots (see ParamRules) keep values and moments
/// bit-identical.
///
/// Moments (`MomentStorage`): `full` keeps m and v as T; `bf16` keeps them as bfloat16 (float
/// parameters only): the update is computed in float from the widened moments, which are then
/// stored with stochastic rounding driven by a counter-based hash of (step, parameter index), so
/// a run is bit-reproducible and does not depend on how the elements are split among threads
/// or processes. Half the optimiser memory, with the moments' precision reduced to 8 bits.
///
/// A step may be given an UpdateFollower (linalg/update_follower.hpp): the slots it follows are
/// then updated in blocks of follower_block_rows rows, each handed to the follower right after
/// its update (mixed-precision training's bf16 copies of the weights are so rewritten while the
/// rows are in cache). The arithmetic per element is the same, so the bits do not change.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/bfloat16.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/param_rules.hpp"
#include "causalqwen/core/random.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/update_follower.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

namespace causalqwen::optim {

/// How an optimiser stores its moments m and v: as T, or as bfloat16 (file comment).
enum class MomentStorage { full, bf16 };

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

/// The per-step constants of the update (file comment) in T, for one slot.
template <class T>
struct AdamWCoefficients {
  T b1, b2, eps, one_minus_b1, one_minus_b2, bc2_sqrt, step_size, scale, keep;

  /// Step t ≥ 1 with learning rate lr and gradient factor grad_scale; `keep` is set per slot.
  static AdamWCoefficients at(const AdamWConfig& c, std::uint64_t t, double lr, double grad_scale) {
    AdamWCoefficients k;
    k.b1 = static_cast<T>(c.beta1), k.b2 = static_cast<T>(c.beta2), k.eps = static_cast<T>(c.eps);
    k.one_minus_b1 = static_cast<T>(1.0 - c.beta1), k.one_minus_b2 = static_cast<T>(1.0 - c.beta2);
    k.bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(t))));
    k.step_size = static_cast<T>(lr / (1.0 - std::pow(c.beta1, static_cast<double>(t))));
    k.scale = static_cast<T>(grad_scale);  // g·1 = g exactly
    k.keep = T(1);
    return k;
  }
};

/// The AdamW update of elements [0, n): g = grad[i]·scale (0 when !HasGrad), then m, v, θ as in
/// the file comment. Branch-free, so it vectorises (with -fno-math-errno for std::sqrt).
template <bool HasGrad, class T>
void adamw_kernel(std::size_t n, T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v,
                  const AdamWCoefficients<T> k) {
  for (std::size_t i = 0; i < n; ++i) {
    T g = T(0);
    if constexpr (HasGrad) g = grad[i] * k.scale;
    const T mi = k.b1 * m[i] + k.one_minus_b1 * g;
    const T vi = k.b2 * v[i] + k.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) / k.bc2_sqrt + k.eps);
  }
}

namespace detail_adamw {

/// The state whose mix gives the bits of (key, index): key + index·γ (mod 2⁶⁴), the SplitMix64
/// state for output index + 1 of a stream started at key. Consecutive indices differ by γ.
inline std::uint64_t mix_state(std::uint64_t key, std::uint64_t index) { return key + index * splitmix64_gamma; }

/// 32 well-mixed bits of a state: the top bits of splitmix64_mix(state).
inline std::uint32_t mix_bits(std::uint64_t state) { return static_cast<std::uint32_t>(splitmix64_mix(state) >> 16); }

/// The stochastic-rounding key of step t (one stream of random bits per step).
inline std::uint64_t rounding_key(std::uint64_t t) { return t * 0x632be59bd9b4e019ull; }

}  // namespace detail_adamw

/// adamw_kernel with bfloat16 moments: m and v widened to float, updated as in adamw_kernel,
/// stored rounded stochastically with bits r = mix_bits(mix_state(key, first_index + i)) (low
/// half for m, high half for v); θ is updated from the unrounded float moments. `first_index` is
/// the parameter index of element 0, so the rounding of an element does not depend on how the
/// work is split.
template <bool HasGrad>
void adamw_kernel_bf16(std::size_t n, float* __restrict p, const float* __restrict grad, std::uint16_t* __restrict m,
                       std::uint16_t* __restrict v, const AdamWCoefficients<float> k, std::uint64_t key,
                       std::size_t first_index) {
  // the state advances by γ per element (an addition where the index would take a 64-bit
  // multiply, which AVX2 emulates with three 32-bit ones): the same bits
  std::uint64_t state = detail_adamw::mix_state(key, first_index);
  for (std::size_t i = 0; i < n; ++i, state += splitmix64_gamma) {
    float g = 0.0f;
    if constexpr (HasGrad) g = grad[i] * k.scale;
    const float mi = k.b1 * bf16_to_float(m[i]) + k.one_minus_b1 * g;
    const float vi = k.b2 * bf16_to_float(v[i]) + k.one_minus_b2 * g * g;
    const std::uint32_t r = detail_adamw::mix_bits(state);
    m[i] = float_to_bf16_stochastic(mi, r);
    v[i] = float_to_bf16_stochastic(vi, r >> 16);
    p[i] = p[i] * k.keep - k.step_size * mi / (std::sqrt(vi) / k.bc2_sqrt + k.eps);
  }
}

/// Rows per block in which AdamW updates a followed slot (16 rows of a 4,864-wide matrix: 311 KB
/// of parameters, gradients and moments, which stay in a core's L2 for the follower).
inline constexpr std::size_t follower_block_rows = 16;

/// The optimiser of the parameter elements in `owned()` (all of them by default). With data
/// parallelism (train::Trainer over a dist::Communicator) each process owns one range
/// (shard_ranges) and keeps only that range's moments, so the optimiser state per process falls
/// as 1/N (ZeRO stage 1). Moment
/// element i belongs to parameter element owned().begin + i; when the optimiser owns every
/// element the moment arenas have the parameters' layout.
template <class T>
class AdamW {
 public:
  AdamW(std::shared_ptr<const Layout> layout, AdamWConfig config = {}, ParamRules rules = {},
        MomentStorage storage = MomentStorage::full, std::optional<ElementRange> owned = std::nullopt)
      : cfg_(config), rules_(std::move(rules)), storage_(storage), layout_(layout),
        owned_(owned.value_or(ElementRange{0, layout->total()})) {
    detail::require(cfg_.beta1 >= 0 && cfg_.beta1 < 1 && cfg_.beta2 >= 0 && cfg_.beta2 < 1, "AdamW",
                    "betas must lie in [0, 1), got {} and {}", cfg_.beta1, cfg_.beta2);
    detail::require(cfg_.eps > 0 && cfg_.weight_decay >= 0, "AdamW", "need eps > 0 and weight_decay >= 0");
    detail::require(owned_.begin <= owned_.end && owned_.end <= layout->total(), "AdamW",
                    "the owned range [{}, {}) must lie within the {} elements of the parameters", owned_.begin,
                    owned_.end, layout->total());
    detail::require(storage_ == MomentStorage::full || std::is_same_v<T, float>, "AdamW",
                    "bfloat16 moments need float parameters");
    std::shared_ptr<const Layout> moments = layout;
    if (!owns_all()) {
      auto part = std::make_shared<Layout>();
      part->add("owned", {owned_.size()});
      moments = part;
    }
    if (storage_ == MomentStorage::full) m_.reset(moments), v_.reset(moments);
    else m16_.reset(moments), v16_.reset(moments);
  }

  const AdamWConfig& config() const { return cfg_; }
  const ParamRules& rules() const { return rules_; }
  /// Steps taken so far (t of the bias corrections).
  std::uint64_t steps() const { return t_; }
  void set_steps(std::uint64_t t) { t_ = t; }
  MomentStorage moment_storage() const { return storage_; }
  /// The moments of MomentStorage::full.
  Arena<T>& first_moment() { return require_storage(MomentStorage::full), m_; }
  Arena<T>& second_moment() { return require_storage(MomentStorage::full), v_; }
  const Arena<T>& first_moment() const { return require_storage(MomentStorage::full), m_; }
  const Arena<T>& second_moment() const { return require_storage(MomentStorage::full), v_; }
  /// The bfloat16 bits of the moments of MomentStorage::bf16.
  Arena<std::uint16_t>& first_moment_bf16() { return require_storage(MomentStorage::bf16), m16_; }
  Arena<std::uint16_t>& second_moment_bf16() { return require_storage(MomentStorage::bf16), v16_; }
  /// The parameters' layout.
  const Layout& layout() const { return *layout_; }
  std::shared_ptr<const Layout> shared_layout() const { return layout_; }
  /// The parameter elements this optimiser updates and keeps moments for.
  ElementRange owned() const { return owned_; }
  bool owns_all() const { return owned_.begin == 0 && owned_.end == layout_->total(); }
  /// Bytes of optimiser state held (the two moments of the owned elements).
  std::size_t state_bytes() const {
    return 2 * owned_.size() * (storage_ == MomentStorage::full ? sizeof(T) : sizeof(std::uint16_t));
  }

  /// One update of `params` from `grads`·`grad_scale` with learning rate `lr` (file comment);
  /// bumps the parameters' version (touch) so caches derived from them rebuild.
  /// `follower` (optional) is kept current (file comment).
  void step(Arena<T>& params, const Arena<T>& grads, double lr, double grad_scale = 1.0,
            linalg::UpdateFollower<T>* follower = nullptr) {
    detail::require(grads.size() == layout_->total(), "AdamW::step",
                    "the gradient arena must have the parameters' layout ({} elements, got {})", layout_->total(),
                    grads.size());
    step(params, std::span<const T>(grads.data() + owned_.begin, owned_.size()), lr, grad_scale, follower);
  }

  /// The same update of the owned elements only, from their gradients `owned_grads` (element i
  /// is the gradient of parameter element owned().begin + i); the other elements of `params`
  /// are left as they are. A `follower` is kept current only when this optimiser owns every
  /// element (a shard's step leaves it stale, and it knows so by the arena's version).
  void step(Arena<T>& params, std::span<const T> owned_grads, double lr, double grad_scale = 1.0,
            linalg::UpdateFollower<T>* follower = nullptr) {
    detail::require(params.size() == layout_->total() && owned_grads.size() == owned_.size(), "AdamW::step",
                    "need the parameters' layout ({} elements, got {}) and the owned range's gradients ({}, got {})",
                    layout_->total(), params.size(), owned_.size(), owned_grads.size());
    detail::require(std::isfinite(grad_scale), "AdamW::step", "grad_scale must be finite, got {}", grad_scale);
    ++t_;
    auto k = AdamWCoefficients<T>::at(cfg_, t_, lr, grad_scale);
    if (!owns_all()) follower = nullptr;
    for (const auto& s : layout_->slots()) {
      const ElementRange r = owned_.intersect(s.offset, s.size);
      if (r.size() == 0) continue;
      const std::ptrdiff_t followed = follower ? follower->follow(s) : linalg::UpdateFollower<T>::not_followed;
      if (!rules_.trained(s.name)) {  // frozen: its values, handed over as they are
        if (followed != linalg::UpdateFollower<T>::not_followed) follower->rows_updated(followed, params.data() + s.offset, 0, s.shape[0]);
        continue;
      }
      k.keep = static_cast<T>(rules_.decays(s.name) ? 1.0 - lr * cfg_.weight_decay : 1.0);
      const std::size_t at = r.begin - owned_.begin;  // the first element's index in the owned range
      T* p = params.data() + r.begin;
      const T* g = owned_grads.data() + at;
      // update(begin, end): the kernel over the slot's elements [begin, end)
      const auto update = [&](std::size_t begin, std::size_t end) {
        if (storage_ == MomentStorage::full) {
          adamw_kernel<true>(end - begin, p + begin, g + begin, m_.data() + at + begin, v_.data() + at + begin, k);
        } else if constexpr (std::is_same_v<T, float>) {
          adamw_kernel_bf16<true>(end - begin, p + begin, g + begin, m16_.data() + at + begin, v16_.data() + at + begin, k,
                                  detail_adamw::rounding_key(t_), r.begin + begin);
        }
      };
      if (followed == linalg::UpdateFollower<T>::not_followed) {
        parallel_chunks(r.size(), update);
        continue;
      }
      const std::size_t rows = s.shape[0], cols = s.size / rows;  // a followed slot has rows of its first dimension
      parallel_for((rows + follower_block_rows - 1) / follower_block_rows, s.size, [&](std::size_t block) {
        const std::size_t r0 = block * follower_block_rows, r1 = std::min(rows, r0 + follower_block_rows);
        update(r0 * cols, r1 * cols);
        follower->rows_updated(followed, p + r0 * cols, r0, r1);
      });
    }
    params.touch();
    if (follower) follower->step_done(params.version());
  }

 private:
  void require_storage(MomentStorage wanted) const {
    detail::require(storage_ == wanted, "AdamW", "the moments are stored as {}, not {}",
                    storage_ == MomentStorage::full ? "T" : "bfloat16", wanted == MomentStorage::full ? "T" : "bfloat16");
  }

  AdamWConfig cfg_;
  ParamRules rules_;
  MomentStorage storage_;
  std::shared_ptr<const Layout> layout_;
  ElementRange owned_;
  Arena<T> m_, v_;
  Arena<std::uint16_t> m16_, v16_;
  std::uint64_t t_ = 0;
};

}  // namespace causalqwen::optim
