/// Continuous batching: requests decode together in slots, each engine step advancing every
/// active slot by one token in batched forwards, requests joining and leaving between steps.
///
///   submit ──▶ queue ──(a free slot)──▶ prefill (the joining prompts together) ──▶ slot
///   step:  1. cancelled slots leave; queued requests take the free slots; their prompts are
///             prefilled together, in as few forwards as the rule below allows
///          2. every active slot decides its next token (generate::NextTokenHead, rows with the
///             same decoding settings together), with its own noise stream at its own step
///          3. slots that emitted EOS, were stopped by their hook or reached max_new_tokens leave
///             at once (their cache rows are freed)
///          4. the others feed their token: one forward per group of slots
///
/// The slots are cut into groups of at most linalg::few_rows_max rows, each group one KV cache
/// (nn::KvCache, rows in lockstep) and one forward per step. Inside a group the rows are
/// right-aligned: row r's tokens fill slots [start_r, L) of the group's L slots, the slots
/// before start_r masked. A joining prompt's keys and values, computed by the prefill, are
/// copied to the slots that end at L (the group's rows shift right when the prompt is longer
/// than L); when the row that started first leaves, every row shifts left, so L stays the
/// longest row's length. Rotary positions are each row's own count of tokens.
///
/// The prefix cache: each slot keeps its last prompt's keys and values (after the request has
/// left, until the slot takes another). A joining prompt whose first p tokens (ids and numbers)
/// are a kept prompt's starts from them: the kept slots are copied into its prefill row, right-
/// aligned before the new tokens, and only its other n − p tokens are computed (p ≤ n − 1, so
/// that the last token's z is computed).
///
/// The prefill batches: a forward over rows [B, S] (each joining prompt's new tokens in a row,
/// left-aligned, padding after them masked; the reused slots before them) runs its linear layers
/// over M = B·S rows, and the library's kernels give a row the same bits for any M on the same
/// side of few_rows_max (at most: the few-rows kernel, each row alone; more: the GEMM, each
/// output one chain over k, bf16 weights any M). Alone, generate::Generator prefills a prompt
/// of n tokens in one forward of M = n rows, so the engine puts a prompt of n ≤ few_rows_max
/// tokens only in forwards of M ≤ few_rows_max and one of more tokens only in forwards of
/// M > few_rows_max (rows of padding are added when its new tokens are fewer), and a prompt
/// reuses only a kept prompt of the same side. Attention gives each row what it gives alone:
/// a token attends to its own row's earlier slots, whose scores are sums over the head
/// dimension; masked slots contribute exact zeros to the softmax sums and to P·V, whose sums run
/// in key order.
///
/// A request's tokens and numbers are then those of generate::Generator run on its prompt
/// alone, bit for bit in a float model on the library's float kernel (AVX2 or AVX-512); the
/// decoding forward and the head treat each row alone at up to few_rows_max rows (the same
/// kernels for one row as for eight); the noise is a function of the request's seed and its
/// own step (random_stream.hpp). Double products run on BLAS, whose sums depend on the shapes:
/// the same tokens but for near ties, numbers equal within rounding.
///
/// Not thread-safe: one thread calls submit, cancel and step (the server guards it with a
/// mutex). The callbacks run inside step().
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/generate/generator.hpp"
#include "causalqwen/linalg/gemv.hpp"
#include "causalqwen/serve/slot_cache.hpp"
#include "causalqwen/serve/token_logprobs.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace causalqwen::serve {

/// How a request ended: it finished (EOS, its hook, max_new_tokens) or was cancelled.
enum class Outcome { finished, cancelled };

/// One generation request: a prompt (ids, numbers, the seed of its stream) and how to decode it.
struct Request {
  generate::PromptInput prompt;
  generate::DecodeSettings decode;
  std::size_t max_new_tokens = 32;
  std::vector<std::int64_t> eos_ids;  // stop after emitting one (kept in the result)
  /// After each token, with the result so far; true stops the request (generate::TokenHook).
  std::function<bool(const generate::GenerationResult&)> on_token;
  /// Once, when the request leaves: its result and how it ended.
  std::function<void(generate::GenerationResult&&, Outcome)> on_done;
  /// With `logprobs`: after each token (before on_token, EOS included), the result so far and
  /// the step's logprobs with the `top_logprobs` likeliest classes (token_logprobs.hpp).
  bool logprobs = false;
  std::size_t top_logprobs = 0;
  std::function<void(const generate::GenerationResult&, StepLogprobs&&)> on_logprobs;
};

struct EngineOptions {
  std::size_t slots = 4;         // requests decoded at once
  std::size_t max_sequence = 0;  // positions a request may use (prompt + max_new_tokens − 1); 0: no limit
  bool prefix_cache = true;      // keep each slot's last prompt and start prompts that begin with it from it
  std::size_t prefill_tokens = 4096;  // rows × new tokens one prefill forward takes at most (one prompt: any)
};

template <class T>
class Engine {
 public:
  /// Rows of one forward: the decoding kernels give a row the same bits up to this many rows.
  static constexpr std::size_t group_rows = linalg::few_rows_max;

  Engine(model::CausalQwen<T>& model, EngineOptions options)
      : model_(model), options_(options), head_(model.config()), slots_(options.slots), kept_(options.slots) {
    detail::require(options.slots > 0, "serve::Engine", "slots must be >= 1, got {}", options.slots);
    groups_.resize((options.slots + group_rows - 1) / group_rows);
    for (std::size_t g = 0; g < groups_.size(); ++g)
      model_.begin_inference(groups_[g].state, std::min(group_rows, options.slots - g * group_rows), 0);
  }

  /// Queues `r` and returns its id; DomainError naming the field when the request cannot run.
  std::uint64_t submit(Request r) {
    validate(r);
    const std::uint64_t id = next_id_++;
    queue_.push_back({id, std::move(r)});
    return id;
  }

  /// Cancels a queued or running request (it leaves at the next step, on_done with `cancelled`);
  /// false if the id is unknown or already done.
  bool cancel(std::uint64_t id) {
    for (auto& q : queue_)
      if (q.id == id && !q.cancelled) return q.cancelled = true;
    for (auto& s : slots_)
      if (s.used && s.id == id && !s.cancelled) return s.cancelled = true;
    return false;
  }

  std::size_t queued() const { return queue_.size(); }
  std::size_t running() const {
    return static_cast<std::size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.used; }));
  }
  bool idle() const { return queue_.empty() && running() == 0; }
  std::size_t slots() const { return slots_.size(); }
  /// Slots in use in group g's cache and its length L (for tests and metrics).
  std::size_t group_length(std::size_t g) const { return groups_.at(g).state.backbone.kv.length; }
  /// Prompt tokens taken from kept prompts (the prefix cache), and prompt tokens computed.
  std::uint64_t reused_tokens() const { return reused_tokens_; }
  std::uint64_t prefilled_tokens() const { return prefilled_tokens_; }
  /// Prefill forwards run (prompts that joined at the same step share them).
  std::uint64_t prefill_forwards() const { return prefill_forwards_; }

  /// One engine step (see the file comment). Does nothing when idle.
  void step() {
    for (std::size_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].used && slots_[s].cancelled) leave(s, Outcome::cancelled);
    admit();
    decide_all();
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      compact(g);
      feed(g);
    }
  }

 private:
  struct Queued {
    std::uint64_t id;
    Request request;
    bool cancelled = false;
  };
  struct Slot {
    bool used = false, cancelled = false;
    std::uint64_t id = 0;
    Request request;
    generate::GenerationResult result;
    std::size_t start = 0;     // first slot of the row in its group's cache
    std::int64_t position = 0;  // rotary position of the next token fed
    std::vector<T> z;           // [H] z at the row's last token
  };
  struct Group {
    typename model::CausalQwen<T>::InferenceState state;
  };
  /// A slot's last prompt: its ids and numbers and their keys and values.
  struct KeptPrompt {
    std::vector<std::int64_t> ids;
    std::vector<T> values;
    bool wide = false;  // computed in forwards of more than few_rows_max rows
    nn::KvCache<T> kv;  // one row, slots [0, ids.size())
  };
  /// A request taking a free slot at this step.
  struct Joining {
    std::size_t slot = 0;
    std::size_t reuse = 0;   // its first tokens taken from kept_[source]
    std::size_t source = 0;
    bool wide = false;       // more than few_rows_max prompt tokens
    std::size_t fresh = 0;   // tokens to compute
  };

  void validate(const Request& r) const {
    const auto& cfg = model_.config();
    const auto& p = r.prompt;
    detail::require(!p.ids.empty(), "serve::Engine", "the prompt is empty");
    detail::require(p.values.empty() || p.values.size() == p.ids.size(), "serve::Engine",
                    "the prompt has {} ids but {} values", p.ids.size(), p.values.size());
    for (auto id : p.ids)
      detail::require(id >= 0 && static_cast<std::size_t>(id) < cfg.backbone.vocab_size, "serve::Engine",
                      "the prompt holds id {} outside the vocabulary [0, {})", id, cfg.backbone.vocab_size);
    detail::require(r.max_new_tokens >= 1 && r.max_new_tokens <= generate::max_new_tokens_limit, "serve::Engine",
                    "max_new_tokens must lie in [1, {}], got {}", generate::max_new_tokens_limit, r.max_new_tokens);
    const std::size_t positions = p.ids.size() + r.max_new_tokens - 1;
    detail::require(options_.max_sequence == 0 || positions <= options_.max_sequence, "serve::Engine",
                    "the prompt's {} tokens and max_new_tokens {} need {} positions, more than the {} of a slot",
                    p.ids.size(), r.max_new_tokens, positions, options_.max_sequence);
    r.decode.validate("serve::Engine");
  }

  nn::KvCache<T>& kv(std::size_t g) { return groups_[g].state.backbone.kv; }

  static T value_at(const generate::PromptInput& p, std::size_t i) {
    return p.values.empty() ? T(0) : static_cast<T>(p.values[i]);
  }

  /// Queued requests into the free slots, their prompts prefilled together (file comment).
  void admit() {
    joining_.clear();
    for (std::size_t s = 0; s < slots_.size() && !queue_.empty(); ++s) {
      if (slots_[s].used) continue;
      while (!queue_.empty() && queue_.front().cancelled) {
        auto q = std::move(queue_.front());
        queue_.pop_front();
        if (q.request.on_done) q.request.on_done({}, Outcome::cancelled);
      }
      if (queue_.empty()) break;
      Queued q = std::move(queue_.front());
      queue_.pop_front();
      Slot& slot = slots_[s];
      slot = Slot{};
      slot.used = true;
      slot.id = q.id;
      slot.request = std::move(q.request);
      joining_.push_back(longest_kept_prefix(s));
    }
    if (joining_.empty()) return;
    // the same side of few_rows_max together, fewest new tokens first; each forward takes the
    // next prompts while rows × their longest new part fit its budget
    std::sort(joining_.begin(), joining_.end(), [](const Joining& a, const Joining& b) {
      return a.wide != b.wide ? a.wide : a.fresh != b.fresh ? a.fresh < b.fresh : a.slot < b.slot;
    });
    kept_now_.clear();
    for (std::size_t first = 0; first < joining_.size();) {
      const bool wide = joining_[first].wide;
      const std::size_t budget = wide ? std::max<std::size_t>(options_.prefill_tokens, 1) : linalg::few_rows_max;
      std::size_t last = first + 1;
      while (last < joining_.size() && joining_[last].wide == wide && (last - first + 1) * joining_[last].fresh <= budget) ++last;
      prefill(first, last);
      first = last;
    }
    // the new prompts replace their slots' kept ones only now: a prompt of this step may have
    // read the one its slot kept before
    for (auto& [s, kept] : kept_now_) kept_[s] = std::move(kept);
  }

  /// The joining request of slot s and the longest prefix of its prompt a kept prompt of the
  /// same side of few_rows_max holds (at most all its tokens but the last).
  Joining longest_kept_prefix(std::size_t s) const {
    const auto& p = slots_[s].request.prompt;
    const std::size_t n = p.ids.size();
    Joining j{s, 0, 0, n > linalg::few_rows_max, n};
    if (!options_.prefix_cache) return j;
    for (std::size_t k = 0; k < kept_.size(); ++k) {
      const auto& kept = kept_[k];
      if (kept.ids.empty() || kept.wide != j.wide) continue;
      const std::size_t most = std::min(kept.ids.size(), n - 1);
      std::size_t m = 0;
      while (m < most && kept.ids[m] == p.ids[m] && kept.values[m] == value_at(p, m)) ++m;
      if (m > j.reuse) {
        j.reuse = m;
        j.source = k;
      }
    }
    j.fresh = n - j.reuse;
    return j;
  }

  /// One prefill forward over joining_[first, last): row r holds request r's new tokens at
  /// slots [L, L + fresh_r) after its reused ones at [L − reuse_r, L) (L the longest reuse),
  /// padding after them; then each prompt is placed in its group and kept.
  void prefill(std::size_t first, std::size_t last) {
    const auto& cfg = model_.config();
    const std::size_t H = cfg.hidden_size(), B = last - first;
    const bool wide = joining_[first].wide;
    std::size_t L = 0, S = 0;
    for (std::size_t r = first; r < last; ++r) {
      L = std::max(L, joining_[r].reuse);
      S = std::max(S, joining_[r].fresh);
    }
    // a wide forward keeps more than few_rows_max rows: rows of padding when there are fewer
    const std::size_t rows = wide ? std::max(B, linalg::few_rows_max / S + 1) : B;
    model_.begin_inference(prefill_, rows, L + S);
    auto& cache = prefill_.backbone.kv;
    if (L > 0) {
      cache.use_storage(kept_[joining_[first].source].kv.storage);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t p = r < B ? joining_[first + r].reuse : 0;
        for (std::size_t t = 0; t < L - p; ++t) clear_slot(cache, r, t);
        for (std::size_t t = 0; t < p; ++t) copy_slot(kept_[joining_[first + r].source].kv, 0, t, cache, r, L - p + t);
      }
      cache.length = L;
    }
    ids_.assign(rows * S, 0);
    vals_.assign(rows * S, T(0));
    mask_.assign(rows * S, 0);
    pos_.assign(rows * S, 0);
    for (std::size_t r = 0; r < B; ++r) {
      const Joining& j = joining_[first + r];
      const auto& p = slots_[j.slot].request.prompt;
      for (std::size_t t = 0; t < j.fresh; ++t) {
        const std::size_t i = j.reuse + t, m = r * S + t;
        ids_[m] = p.ids[i];
        vals_[m] = value_at(p, i);
        mask_[m] = 1;
        pos_[m] = static_cast<std::int64_t>(i);
      }
    }
    const auto z = model_.forward_cached({ids_.data(), {rows, S}}, {vals_.data(), {rows, S}}, {mask_.data(), {rows, S}},
                                         {pos_.data(), {rows, S}}, prefill_);  // [rows,S,H]
    ++prefill_forwards_;
    for (std::size_t r = 0; r < B; ++r) {
      const Joining& j = joining_[first + r];
      Slot& slot = slots_[j.slot];
      const auto& p = slot.request.prompt;
      const std::size_t n = p.ids.size();
      const T* z_last = z.data + (r * S + j.fresh - 1) * H;
      slot.z.assign(z_last, z_last + H);
      slot.position = static_cast<std::int64_t>(n);
      place(j.slot, cache, r, L - j.reuse, n);
      reused_tokens_ += j.reuse;
      prefilled_tokens_ += j.fresh;
      if (!options_.prefix_cache) continue;
      KeptPrompt kept;
      kept.ids.assign(p.ids.begin(), p.ids.end());
      for (std::size_t i = 0; i < n; ++i) kept.values.push_back(value_at(p, i));
      kept.wide = wide;
      kept.kv.reset(1, cache.num_layers, cache.num_kv_heads, cache.head_dim, n);
      kept.kv.use_storage(cache.storage);
      for (std::size_t t = 0; t < n; ++t) copy_slot(cache, r, L - j.reuse + t, kept.kv, 0, t);
      kept.kv.length = n;
      kept_now_.emplace_back(j.slot, std::move(kept));
    }
  }

  /// Slot s's n prompt tokens, slots [from, from + n) of row r in `source`, into its group's
  /// cache, ending at its length L (the rows shift right when n > L).
  void place(std::size_t s, nn::KvCache<T>& source, std::size_t r, std::size_t from, std::size_t n) {
    const std::size_t g = s / group_rows, row = s % group_rows;
    auto& cache = kv(g);
    cache.use_storage(source.storage);
    std::size_t L = cache.length;
    if (n > L) {
      cache.reserve(n);
      shift_rows(cache, 0, n - L, L);
      for (std::size_t o = 0; o < slots_.size(); ++o)
        if (o != s && slots_[o].used && o / group_rows == g) slots_[o].start += n - L;
      L = cache.length = n;
    }
    for (std::size_t t = 0; t < L - n; ++t) clear_slot(cache, row, t);
    for (std::size_t t = 0; t < n; ++t) copy_slot(source, r, from + t, cache, row, L - n + t);
    slots_[s].start = L - n;
  }

  /// The next token of every active slot, rows of the same settings together (at most
  /// group_rows per head step); slots that end leave.
  void decide_all() {
    const auto& cfg = model_.config();
    const std::size_t H = cfg.hidden_size();
    std::vector<char> done(slots_.size(), 0);
    for (std::size_t first = 0; first < slots_.size(); ++first) {
      if (!slots_[first].used || done[first]) continue;
      const auto settings = slots_[first].request.decode;  // a copy: the slot may leave below
      rows_.clear();
      for (std::size_t s = first; s < slots_.size() && rows_.size() < group_rows; ++s)
        if (slots_[s].used && !done[s] && same(slots_[s].request.decode, settings)) rows_.push_back(s);
      const std::size_t R = rows_.size();
      z_rows_.resize(R * H);
      seeds_.resize(R);
      steps_.resize(R);
      for (std::size_t i = 0; i < R; ++i) {
        const Slot& slot = slots_[rows_[i]];
        std::copy_n(slot.z.data(), H, z_rows_.data() + i * H);
        seeds_[i] = slot.request.prompt.seed;
        steps_[i] = slot.result.tokens.size();
        done[rows_[i]] = 1;
      }
      const auto noise = generate::draw_step_noise<T>(seeds_, steps_, settings, cfg.causal_size, action_, pick_);
      decisions_.resize(R);
      head_.step(model_.head_params(R), {z_rows_.data(), {R, H}}, settings, noise,
                 std::span<generate::StepDecision>(decisions_.data(), R));
      for (std::size_t i = 0; i < R; ++i) {
        const std::size_t s = rows_[i];
        Slot& slot = slots_[s];
        const auto& d = decisions_[i];
        slot.result.tokens.push_back({d.token, d.value, d.scale, d.p_num, d.score});
        if (slot.request.logprobs && slot.request.on_logprobs) {
          const std::size_t K = cfg.num_classes;
          const bool scaled = !head_.scale_S().empty();
          slot.request.on_logprobs(
              slot.result, step_logprobs<T>(settings.mode, head_.loc_S().data() + i * K,
                                            scaled ? head_.scale_S().data() + i * K : nullptr,
                                            model_.head_params().action.threshold.data, K, d.token,
                                            slot.request.top_logprobs, logprob_work_));
        }
        const auto& eos = slot.request.eos_ids;
        if (std::find(eos.begin(), eos.end(), d.token) != eos.end()) {
          slot.result.stop = generate::StopReason::eos;
        } else if (slot.request.on_token && slot.request.on_token(slot.result)) {
          slot.result.stop = generate::StopReason::hook;
        } else if (slot.result.tokens.size() == slot.request.max_new_tokens) {
          slot.result.stop = generate::StopReason::length;
        } else {
          continue;
        }
        leave(s, Outcome::finished);
      }
    }
  }

  static bool same(const generate::DecodeSettings& a, const generate::DecodeSettings& b) {
    return a.mode == b.mode && a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
           a.shared_noise == b.shared_noise && a.subtract_threshold == b.subtract_threshold;
  }

  /// Slot s leaves: on_done, its cache row masked out.
  void leave(std::size_t s, Outcome outcome) {
    Slot& slot = slots_[s];
    auto& cache = kv(s / group_rows);
    const std::size_t row = s % group_rows;
    for (std::size_t t = 0; t < cache.length; ++t) cache.mask[row * cache.capacity + t] = 0;
    auto done = std::move(slot.request.on_done);
    auto result = std::move(slot.result);
    slot = Slot{};
    if (done) done(std::move(result), outcome);
  }

  /// Group g's rows shifted left so that its first row starts at slot 0 (an empty group: L = 0).
  void compact(std::size_t g) {
    auto& cache = kv(g);
    std::size_t first = std::numeric_limits<std::size_t>::max();
    for (std::size_t s = g * group_rows; s < std::min(slots_.size(), (g + 1) * group_rows); ++s)
      if (slots_[s].used) first = std::min(first, slots_[s].start);
    if (first == std::numeric_limits<std::size_t>::max()) {
      std::fill(cache.mask.begin(), cache.mask.end(), 0);
      cache.length = 0;
      return;
    }
    if (first == 0) return;
    shift_rows(cache, first, 0, cache.length - first);
    cache.length -= first;
    for (std::size_t s = g * group_rows; s < std::min(slots_.size(), (g + 1) * group_rows); ++s)
      if (slots_[s].used) slots_[s].start -= first;
  }

  /// One forward of group g: each active row feeds its last token (a <NUM> with its number),
  /// the free rows a masked pad slot.
  void feed(std::size_t g) {
    const auto& cfg = model_.config();
    const std::size_t H = cfg.hidden_size(), first = g * group_rows, B = std::min(group_rows, slots_.size() - first);
    bool any = false;
    ids_.assign(B, 0);
    vals_.assign(B, T(0));
    mask_.assign(B, 0);
    pos_.assign(B, 0);
    for (std::size_t r = 0; r < B; ++r) {
      const Slot& slot = slots_[first + r];
      if (!slot.used) continue;
      any = true;
      const auto& last = slot.result.tokens.back();
      ids_[r] = last.id;
      vals_[r] = last.id == cfg.num_token_id ? static_cast<T>(last.value) : T(0);
      mask_[r] = 1;
      pos_[r] = slot.position;
    }
    if (!any) return;
    const auto z = model_.forward_cached({ids_.data(), {B, 1}}, {vals_.data(), {B, 1}}, {mask_.data(), {B, 1}},
                                         {pos_.data(), {B, 1}}, groups_[g].state);
    for (std::size_t r = 0; r < B; ++r) {
      Slot& slot = slots_[first + r];
      if (!slot.used) continue;
      std::copy_n(z.data + r * H, H, slot.z.data());
      ++slot.position;
    }
  }

  model::CausalQwen<T>& model_;
  EngineOptions options_;
  generate::NextTokenHead<T> head_;
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
  std::deque<Queued> queue_;
  std::uint64_t next_id_ = 1;
  typename model::CausalQwen<T>::InferenceState prefill_;
  std::vector<KeptPrompt> kept_;  // by slot: its last prompt (empty ids: none)
  std::vector<std::pair<std::size_t, KeptPrompt>> kept_now_;
  std::vector<Joining> joining_;
  std::uint64_t reused_tokens_ = 0, prefilled_tokens_ = 0, prefill_forwards_ = 0;
  std::vector<double> logprob_work_;
  std::vector<std::int64_t> ids_, mask_, pos_;
  std::vector<T> vals_, z_rows_, action_;
  std::vector<double> pick_;
  std::vector<std::uint64_t> seeds_;
  std::vector<std::size_t> steps_, rows_;
  std::vector<generate::StepDecision> decisions_;
};

}  // namespace causalqwen::serve
