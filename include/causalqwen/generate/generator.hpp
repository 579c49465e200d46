/// Generation: batched prompts → continuations, in any of the four modes (decode_mode.hpp).
///
///   prompts (ids + numeric values, any lengths) ──pad (left or right)──▶ slots [B, P]
///   prefill once (KV cache) ──▶ z at each row's last prompt token ──NextTokenHead──▶ token, number
///   loop: feed each active row's token (and, for <NUM>, its number, so φ(v) enters the next
///         embedding) as one new slot; finished rows feed a masked pad slot
///   stop per row on an EOS id, on the caller's hook (e.g. stop strings), or after max_new_tokens
///
/// Rotary positions count each row's real tokens, masks hide padding, so a row's continuation
/// does not depend on the padding side or on the other rows; every random draw comes from the
/// row's own counter-based stream (random_stream.hpp), keyed by the prompt's seed and the step
/// (or step 0 for every step with shared noise). `use_cache = false` recomputes from scratch at
/// every step: a new KV cache is built for the whole sequence so far (the prompt in one prefill,
/// then each generated slot in turn) with the same kernels, so tokens and numbers equal the
/// cached run's bit for bit; it checks the cache's bookkeeping across steps (positions, masks,
/// growth). Agreement of the cached path with the full training forward, Transformer::forward,
/// is tested separately (tests/nn/test_kv_cache.cpp) within float tolerances.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/text/padding.hpp"
#include "causalqwen/generate/decode_mode.hpp"
#include "causalqwen/generate/next_token.hpp"
#include "causalqwen/generate/random_stream.hpp"
#include "causalqwen/model/causal_qwen.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

namespace causalqwen::generate {

using model::CausalQwen;

/// A prompt: token ids and the numeric value at each position (0 where the token is not <NUM>;
/// empty = all 0), and the seed of its random stream.
struct PromptInput {
  std::vector<std::int64_t> ids;
  std::vector<double> values;
  std::uint64_t seed = 0;
};

enum class StopReason { length, eos, hook };

/// The most tokens one call may generate: far above any model's positions (a KV cache of 2²⁰
/// positions already needs gigabytes), and small enough that prompt length + max_new_tokens
/// never wraps (so max_new_tokens = −1 read into a size_t is refused, not allocated).
inline constexpr std::size_t max_new_tokens_limit = std::size_t{1} << 20;

struct GenerationOptions {
  DecodeSettings decode;
  std::size_t max_new_tokens = 32;
  std::vector<std::int64_t> eos_ids;  // a row stops after emitting one of these (kept in the output)
  bool use_cache = true;
  PaddingSide padding = PaddingSide::left;  // left: every row's next token at the same column
  std::int64_t pad_id = 0;  // id fed in padding slots (masked, so its value never matters)
};

/// One generated token with what the head said about it.
struct GeneratedToken {
  std::int64_t id = -1;
  double value = 0;  // the number written for <NUM> (and the head's number at every step)
  double scale = 0;  // its Cauchy scale
  double p_num = 0;  // P(<NUM>) at this step
  double score = 0;  // the winning score (see StepDecision)
};

struct GenerationResult {
  std::vector<GeneratedToken> tokens;
  StopReason stop = StopReason::length;
};

/// Called after each token of row `row` (its result so far); returning true stops the row.
using TokenHook = std::function<bool(std::size_t row, const GenerationResult& so_far)>;

/// u ∈ (0,1) in T (a double near 0 or 1 may round to 0 or 1 in float).
template <class T>
T open_unit(double u) {
  T v = static_cast<T>(u);
  if (v <= T(0)) v = std::numeric_limits<T>::min();
  if (v >= T(1)) v = std::nextafter(T(1), T(0));
  return v;
}

/// The noise of one decoding step for R rows, row i being at its own step steps[i] of the stream
/// seeded seeds[i] (so a row's noise depends on its seed and step alone, never on its batch):
///   sampling, causal: action[i,j] = open_unit(u(action, step_i, j)), j < C (step_i = 0 for every
///                     step with shared noise);  every mode: pick[i] = u(token_pick, step_i, 0).
/// `action` and `pick` hold the values; the result views them.
template <class T>
StepNoise<T> draw_step_noise(std::span<const std::uint64_t> seeds, std::span<const std::size_t> steps,
                             const DecodeSettings& s, std::size_t C, std::vector<T>& action, std::vector<double>& pick) {
  const std::size_t R = seeds.size();
  const bool noisy = s.mode == GenerationMode::sampling || s.mode == GenerationMode::causal;
  action.assign(noisy ? R * C : 0, T(0));
  pick.assign(R, 0.5);
  for (std::size_t i = 0; i < R; ++i) {
    const RowStream stream{seeds[i]};
    const std::uint64_t step = s.shared_noise ? 0 : steps[i];
    if (noisy)
      for (std::size_t j = 0; j < C; ++j) action[i * C + j] = open_unit<T>(stream.uniform(NoiseTag::action, step, j));
    pick[i] = stream.uniform(NoiseTag::token_pick, steps[i], 0);
  }
  return {noisy ? TensorView<const T, 2>(action.data(), {R, C}) : TensorView<const T, 2>{},
          TensorView<const double, 1>(pick.data(), {R})};
}

template <class T>
class Generator {
 public:
  explicit Generator(CausalQwen<T>& model) : model_(model), head_(model.config()) {}

  /// Continuations of `prompts` (one result per prompt, in order).
  std::vector<GenerationResult> run(std::span<const PromptInput> prompts, const GenerationOptions& o,
                                    const TokenHook& hook = {}) {
    const auto& cfg = model_.config();
    o.decode.validate("generate");
    const std::size_t B = prompts.size();
    std::vector<GenerationResult> results(B);
    detail::require(o.max_new_tokens <= max_new_tokens_limit, "generate",
                    "max_new_tokens {} exceeds the limit of {} tokens", o.max_new_tokens,
                    max_new_tokens_limit);
    if (B == 0 || o.max_new_tokens == 0) return results;
    std::size_t P = 0;
    for (std::size_t b = 0; b < B; ++b) {
      const auto& pr = prompts[b];
      detail::require(!pr.ids.empty(), "generate", "prompt {} is empty", b);
      detail::require(pr.values.empty() || pr.values.size() == pr.ids.size(), "generate",
                      "prompt {} has {} ids but {} values", b, pr.ids.size(), pr.values.size());
      for (auto id : pr.ids)
        detail::require(id >= 0 && static_cast<std::size_t>(id) < cfg.backbone.vocab_size, "generate",
                        "prompt {} holds id {} outside the vocabulary [0, {})", b, id, cfg.backbone.vocab_size);
      P = std::max(P, pr.ids.size());
    }
    prompt_slots_ = P;
    detail::require(o.pad_id >= 0 && static_cast<std::size_t>(o.pad_id) < cfg.backbone.vocab_size, "generate",
                    "pad_id {} is outside the vocabulary", o.pad_id);
    // the prompt slots [B, P]
    const std::size_t total = P + o.max_new_tokens;
    seq_ids_.assign(B * total, o.pad_id);
    seq_vals_.assign(B * total, T(0));
    seq_mask_.assign(B * total, 0);
    seq_pos_.assign(B * total, 0);
    std::vector<std::size_t> last(B);
    std::vector<std::int64_t> count(B, 0);
    for (std::size_t b = 0; b < B; ++b) {
      const auto& pr = prompts[b];
      const std::size_t n = pr.ids.size(), start = o.padding == PaddingSide::left ? P - n : 0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t m = b * total + start + i;
        seq_ids_[m] = pr.ids[i];
        seq_vals_[m] = pr.values.empty() ? T(0) : static_cast<T>(pr.values[i]);
        seq_mask_[m] = 1;
        seq_pos_[m] = count[b]++;
      }
      last[b] = start + n - 1;
    }
    // prefill
    const std::size_t H = cfg.hidden_size();
    z_rows_.assign(B * H, T(0));
    if (o.use_cache) {
      model_.begin_inference(state_, B, total);
      const auto prompt = slots(B, total, 0, P);
      const auto z = model_.forward_cached(prompt.ids, prompt.vals, prompt.mask, prompt.pos, state_);
      for (std::size_t b = 0; b < B; ++b) std::copy_n(z.data + (b * P + last[b]) * H, H, z_rows_.data() + b * H);
    } else {
      recompute(B, total, P, last);
    }
    std::vector<char> active(B, 1);
    std::vector<std::size_t> rows;
    std::vector<StepDecision> decisions(B);
    for (std::size_t t = 0;; ++t) {
      rows.clear();
      for (std::size_t b = 0; b < B; ++b)
        if (active[b]) rows.push_back(b);
      decide(rows, prompts, t, o.decode, decisions);
      const std::size_t slot = P + t;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::size_t b = rows[i];
        const auto& d = decisions[i];
        results[b].tokens.push_back({d.token, d.value, d.scale, d.p_num, d.score});
        const std::size_t m = b * total + slot;
        seq_ids_[m] = d.token;
        seq_vals_[m] = d.token == cfg.num_token_id ? static_cast<T>(d.value) : T(0);
        seq_mask_[m] = 1;
        seq_pos_[m] = count[b]++;
        if (std::find(o.eos_ids.begin(), o.eos_ids.end(), d.token) != o.eos_ids.end()) {
          results[b].stop = StopReason::eos;
          active[b] = 0;
        } else if (hook && hook(b, results[b])) {
          results[b].stop = StopReason::hook;
          active[b] = 0;
        } else if (t + 1 == o.max_new_tokens) {
          results[b].stop = StopReason::length;
          active[b] = 0;
        }
      }
      if (std::none_of(active.begin(), active.end(), [](char a) { return a != 0; })) break;
      // feed the new slot (finished rows: a masked pad slot, as seq_* already hold)
      if (o.use_cache) {
        const auto step = slots(B, total, slot, slot + 1);
        const auto z = model_.forward_cached(step.ids, step.vals, step.mask, step.pos, state_);
        std::copy_n(z.data, B * H, z_rows_.data());
      } else {
        std::vector<std::size_t> at(B, slot);
        recompute(B, total, slot + 1, at);
      }
    }
    return results;
  }

  /// The model's KV cache and scratch (for diagnostics: its size, …).
  const typename CausalQwen<T>::InferenceState& state() const { return state_; }

 private:
  struct SlotViews {
    TensorView<const std::int64_t, 2> ids;
    TensorView<const T, 2> vals;
    TensorView<const std::int64_t, 2> mask, pos;
  };
  /// Slots [s0, s1) of every row, copied into contiguous [B, s1 − s0] buffers.
  SlotViews slots(std::size_t B, std::size_t total, std::size_t s0, std::size_t s1) {
    const std::size_t n = s1 - s0;
    ids_.resize(B * n), vals_.resize(B * n), mask_.resize(B * n), pos_.resize(B * n);
    for (std::size_t b = 0; b < B; ++b) {
      const std::size_t from = b * total + s0;
      std::copy_n(seq_ids_.data() + from, n, ids_.data() + b * n);
      std::copy_n(seq_vals_.data() + from, n, vals_.data() + b * n);
      std::copy_n(seq_mask_.data() + from, n, mask_.data() + b * n);
      std::copy_n(seq_pos_.data() + from, n, pos_.data() + b * n);
    }
    return {{ids_.data(), {B, n}}, {vals_.data(), {B, n}}, {mask_.data(), {B, n}}, {pos_.data(), {B, n}}};
  }

  /// Recomputation from scratch over slots [0, len) of every row, with a new KV cache: the
  /// prompt slots in one prefill, then each later slot alone, exactly as the cached run fed them;
  /// z_rows_ = z at slot at[b] of row b (at[b] < prompt_slots_ after the prefill, else len − 1).
  void recompute(std::size_t B, std::size_t total, std::size_t len, const std::vector<std::size_t>& at) {
    const std::size_t H = model_.config().hidden_size(), P = prompt_slots_;
    model_.begin_inference(scratch_state_, B, total);
    const auto prompt = slots(B, total, 0, P);
    const auto zp = model_.forward_cached(prompt.ids, prompt.vals, prompt.mask, prompt.pos, scratch_state_);
    if (len == P) {
      for (std::size_t b = 0; b < B; ++b) std::copy_n(zp.data + (b * P + at[b]) * H, H, z_rows_.data() + b * H);
      return;
    }
    for (std::size_t s = P; s < len; ++s) {
      const auto step = slots(B, total, s, s + 1);
      const auto z = model_.forward_cached(step.ids, step.vals, step.mask, step.pos, scratch_state_);
      if (s + 1 == len) std::copy_n(z.data, B * H, z_rows_.data());
    }
  }

  /// Decisions for the given rows from z_rows_, with each row's noise for step t.
  void decide(const std::vector<std::size_t>& rows, std::span<const PromptInput> prompts, std::size_t t,
              const DecodeSettings& s, std::vector<StepDecision>& out) {
    const auto& cfg = model_.config();
    const std::size_t R = rows.size(), H = cfg.hidden_size();
    z_active_.resize(R * H);
    seeds_.resize(R);
    for (std::size_t i = 0; i < R; ++i) {
      std::copy_n(z_rows_.data() + rows[i] * H, H, z_active_.data() + i * H);
      seeds_[i] = prompts[rows[i]].seed;
    }
    steps_.assign(R, t);
    const auto noise = draw_step_noise<T>(seeds_, steps_, s, cfg.causal_size, action_, pick_);
    head_.step(model_.head_params(R), {z_active_.data(), {R, H}}, s, noise,
               std::span<StepDecision>(out.data(), R));
  }

  CausalQwen<T>& model_;
  NextTokenHead<T> head_;
  typename CausalQwen<T>::InferenceState state_;
  typename CausalQwen<T>::InferenceState scratch_state_;  // the no-cache path's cache, rebuilt each step
  std::size_t prompt_slots_ = 0;
  std::vector<std::int64_t> seq_ids_, seq_mask_, seq_pos_, ids_, mask_, pos_;
  std::vector<T> seq_vals_, vals_, z_rows_, z_active_, action_;
  std::vector<double> pick_;
  std::vector<std::uint64_t> seeds_;
  std::vector<std::size_t> steps_;
};

/// Continuations of `prompts` with `model` (see the file comment); one result per prompt.
template <class T>
std::vector<GenerationResult> generate(CausalQwen<T>& model, std::span<const PromptInput> prompts,
                                       const GenerationOptions& options, const TokenHook& hook = {}) {
  Generator<T> g(model);
  return g.run(prompts, options, hook);
}

}  // namespace causalqwen::generate
