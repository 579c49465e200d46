/// StreamingAdamW: AdamW (the update of adamw.hpp, global-norm clipping included) that never
/// holds a whole gradient arena. The weight gradient of a linear map over M tokens is the
/// product dW = dYᵀ·X of thin factors (dY [M,N], X [M,K]); during a backward pass given
/// `target()`, those products are kept as factors (linalg/weight_grad_sink.hpp),
/// and `step` forms each dW tile by tile ([rows,K], about 8 MB) right where it is used:
///
///   backward:   factors (dY, X) per weight;  small gradients (norms, biases, embedding rows,
///               b_noise …) land in an on-demand arena of which only written pages are resident
///   norm:       ‖g‖² = Σ_slots ‖D_s + Σ_r dY_rᵀX_r‖²: for a slot of plain products only, the
///               Gram form ‖dYᵀX‖² = Σ_ij (dY·dYᵀ)_ij (X·Xᵀ)_ij (stacked over the products,
///               in double, M×M); otherwise the tiles are formed and summed (double)
///   step:       per tile: g = D + Σ dYᵀX [+ sign(W) ⊙ Σ dYᵀX for |W| products]; g ← g·grad_scale;
///               AdamW on (θ, m, v) of the tile
///
/// A slot that takes no Gram form (W_cls: its |W| products are masked by sign(W), and its <NUM>
/// row is written directly) is formed twice, for the norm and again for the update,
/// unless `set_tile_cache_bytes` gives memory to keep the norm's tiles: the update then reads
/// the kept ones (the same values) and forms only those that did not fit.
///
/// Moments (`MomentStorage`, adamw.hpp): `full` keeps m and v as T, `bf16` as bfloat16 with
/// stochastic rounding; either way the arithmetic is AdamW's (the same kernels), so results
/// agree with AdamW + clip_grad_norm of the same storage to the GEMMs' summation order.
///
///   cq::optim::StreamingAdamW<float> opt(model.params().shared_layout(), {}, {}, MomentStorage::bf16);
///   model.train_step(batch, cache, opt.target());
///   const double norm = opt.grad_norm(model.params());
///   opt.step(model.params(), lr, cq::optim::clip_factor(norm, 1.0));
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/param_rules.hpp"
#include "causalqwen/core/threading.hpp"
#include "causalqwen/linalg/matmul.hpp"
#include "causalqwen/linalg/weight_grad_sink.hpp"
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace causalqwen::optim {

template <class T>
class StreamingAdamW : private linalg::WeightGradSink<T> {
 public:
  StreamingAdamW(std::shared_ptr<const Layout> layout, AdamWConfig config = {}, ParamRules rules = {},
                 MomentStorage storage = MomentStorage::full)
      : cfg_(config), rules_(std::move(rules)), storage_(storage), grads_(layout, ArenaMemory::on_demand) {
    detail::require(cfg_.beta1 >= 0 && cfg_.beta1 < 1 && cfg_.beta2 >= 0 && cfg_.beta2 < 1, "StreamingAdamW",
                    "betas must lie in [0, 1), got {} and {}", cfg_.beta1, cfg_.beta2);
    detail::require(cfg_.eps > 0 && cfg_.weight_decay >= 0, "StreamingAdamW", "need eps > 0 and weight_decay >= 0");
    detail::require(storage_ == MomentStorage::full || std::is_same_v<T, float>, "StreamingAdamW",
                    "bfloat16 moments need float parameters");
    if (storage_ == MomentStorage::full) m_.reset(layout), v_.reset(layout);
    else m16_.reset(layout), v16_.reset(layout);
    products_.resize(layout->slots().size());
  }

  const AdamWConfig& config() const { return cfg_; }
  const ParamRules& rules() const { return rules_; }
  MomentStorage moment_storage() const { return storage_; }
  /// Steps taken so far (t of the bias corrections).
  std::uint64_t steps() const { return t_; }
  void set_steps(std::uint64_t t) { t_ = t; }
  /// Bytes of the moments held (T or bfloat16 per element, two moments).
  std::size_t state_bytes() const {
    return 2 * (storage_ == MomentStorage::full ? m_.size() * sizeof(T) : m16_.size() * sizeof(std::uint16_t));
  }
  /// The moments of MomentStorage::full (laid out like the parameters).
  Arena<T>& first_moment() { return full_moment(m_); }
  Arena<T>& second_moment() { return full_moment(v_); }
  /// The bfloat16 bits of the moments of MomentStorage::bf16.
  Arena<std::uint16_t>& first_moment_bf16() { return bf16_moment(m16_); }
  Arena<std::uint16_t>& second_moment_bf16() { return bf16_moment(v16_); }

  /// The arena of the small gradients (everything but the weight products kept as factors).
  /// Handing it out forgets the tiles kept by the last grad_norm (they may no longer hold).
  Arena<T>& gradients() {
    forget_kept_tiles();
    return grads_;
  }

  /// The gradient target to pass to train_step: small gradients land in gradients(), the
  /// weight-gradient products are kept as factors (those of frozen slots are dropped).
  linalg::GradientTarget<T> target() {
    forget_kept_tiles();
    return {grads_, this};
  }

  /// Memory for the gradient tiles that grad_norm forms (slots without a Gram form, such as
  /// W_cls), kept so that the next step reads them instead of forming them again: up to `bytes`,
  /// whole tiles, in slot order (0, the default: none kept, the least memory). The buffer is
  /// sized at the next grad_norm to what the model's tiled slots need within `bytes`, and kept.
  /// Kept tiles are used only by a step on the same parameters, unchanged since grad_norm, with
  /// no gradient captured in between (target(), gradients() and a new factor forget them).
  void set_tile_cache_bytes(std::size_t bytes) {
    tile_cache_bytes_ = bytes;
    forget_kept_tiles();
    if (kept_.size() * sizeof(T) > bytes) kept_ = PageBuffer<T>();
  }
  std::size_t tile_cache_bytes() const { return tile_cache_bytes_; }
  /// Bytes of the kept-tile buffer now held (at most tile_cache_bytes()).
  std::size_t tile_cache_held_bytes() const { return kept_.size() * sizeof(T); }
  /// Elements of gradient that the last grad_norm kept for the step (in whole tiles).
  std::size_t kept_tile_elements() const { return kept_used_; }

  /// Bytes held by the kept factors (for diagnostics and the benchmark).
  std::size_t factor_bytes() const {
    std::size_t n = 0;
    for (const auto& f : factors_) n += f->size() * sizeof(T);
    return n;
  }

  /// ‖g‖ over the trained slots (see the file comment; double accumulation in a fixed order).
  /// `params` supplies sign(W) for the |W| products.
  double grad_norm(const Arena<T>& params) const {
    detail::require(params.size() == grads_.size(), "StreamingAdamW::grad_norm",
                    "the parameter arena ({} elements) does not have the optimiser's layout ({})", params.size(),
                    grads_.size());
    prepare_kept_tiles(params);
    double total = 0;
    const auto& slots = grads_.layout().slots();
    for (std::size_t s = 0; s < slots.size(); ++s) {
      if (!rules_.trained(slots[s].name)) continue;
      total += slot_norm2(s, params.data() + slots[s].offset);
    }
    return std::sqrt(total);
  }

  /// One AdamW update of `params` from the captured gradient times `grad_scale` (the clipping
  /// factor), then forgets the factors and zeroes the gradient arena (keeping its pages).
  void step(Arena<T>& params, double lr, double grad_scale = 1.0) {
    detail::require(params.size() == grads_.size(), "StreamingAdamW::step",
                    "the parameter arena ({} elements) does not have the optimiser's layout ({})", params.size(),
                    grads_.size());
    detail::require(std::isfinite(grad_scale), "StreamingAdamW::step", "grad_scale must be finite, got {}", grad_scale);
    ++t_;
    auto k = AdamWCoefficients<T>::at(cfg_, t_, lr, grad_scale);
    const auto& slots = grads_.layout().slots();
    const bool kept_valid = kept_for_ == params.data() && kept_version_ == params.version();
    std::size_t next_kept = 0;  // kept tiles come in the order grad_norm formed them
    for (std::size_t s = 0; s < slots.size(); ++s) {
      const auto& slot = slots[s];
      if (!rules_.trained(slot.name)) continue;
      k.keep = static_cast<T>(rules_.decays(slot.name) ? 1.0 - lr * cfg_.weight_decay : 1.0);
      if (products_[s].empty()) {
        update_direct(params, slot, k);
        continue;
      }
      const std::size_t cols = row_length(slot), rows = slot.size / cols;
      for (std::size_t r0 = 0, nr = 0; r0 < rows; r0 += nr) {
        nr = tile_rows_from(s, r0, rows, cols);
        const std::size_t off = slot.offset + r0 * cols;
        const T* g = nullptr;  // [nr, cols]
        if (kept_valid && next_kept < kept_tiles_.size() && kept_tiles_[next_kept].slot == s &&
            kept_tiles_[next_kept].row0 == r0 && kept_tiles_[next_kept].rows == nr)
          g = kept_.data() + kept_tiles_[next_kept++].at;
        else {
          T* tile = scratch_tile(nr * cols);
          form_tile(s, r0, nr, tile, params.data() + off);
          g = tile;
        }
        update_elements(params.data() + off, off, nr * cols, k, g);
      }
    }
    params.touch();
    clear();
  }

  /// Forgets the captured factors and zeroes the gradient arena (without a step). The factors'
  /// buffers and the arena's pages are kept for the next step.
  void clear() {
    for (auto& p : products_) p.clear();
    factors_.clear();
    factor_sources_.clear();
    pool_used_ = 0;
    forget_kept_tiles();
    grads_.zero();
  }

 private:
  using Coefficients = AdamWCoefficients<T>;
  using Factor = std::shared_ptr<const std::vector<T>>;
  /// dW[row0 : row0 + rows, :] += [sign(W) ⊙] dy[:, col0 : col0 + rows]ᵀ · x   (dy [M,ld], x [M,K])
  struct Product {
    std::size_t row0, rows;
    Factor dy;
    std::size_t dy_ld, col0, m;
    Factor x;
    bool abs;
  };

  static T sign(T x) { return T((x > T(0)) - (x < T(0))); }

  Arena<T>& full_moment(Arena<T>& a) {
    detail::require(storage_ == MomentStorage::full, "StreamingAdamW", "the moments are stored as bfloat16, not T");
    return a;
  }
  Arena<std::uint16_t>& bf16_moment(Arena<std::uint16_t>& a) {
    detail::require(storage_ == MomentStorage::bf16, "StreamingAdamW", "the moments are stored as T, not bfloat16");
    return a;
  }

  /// g += sign(w) ⊙ g_abs over n elements (the |W| products' part of a tile).
  static void add_signed(T* __restrict g, const T* __restrict g_abs, const T* __restrict w, std::size_t n) {
    parallel_chunks(n, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) g[i] += sign(w[i]) * g_abs[i];
    });
  }
  static std::size_t row_length(const Layout::Slot& s) { return s.shape.empty() ? 1 : s.shape.back(); }

  /// WeightGradSink: keeps dY and X of a product whose dW lies in gradients(), split by slot.
  bool accept(TensorView<T, 2> dw, TensorView<const T, 2> dy, TensorView<const T, 2> x,
              TensorView<const T, 2> w) override {
    forget_kept_tiles();
    const T* base = grads_.data();
    if (dw.data < base || dw.data + dw.size() > base + grads_.size()) return false;
    const std::size_t begin = static_cast<std::size_t>(dw.data - base), K = dw.shape[1], N = dw.shape[0];
    const auto& slots = grads_.layout().slots();
    // the slots covered by dw's rows must each be whole rows of length K
    auto& pieces = pieces_;  // (slot, first row of dw in it)
    pieces.clear();
    for (std::size_t r = 0; r < N;) {
      const std::size_t off = begin + r * K;
      const auto it = std::upper_bound(slots.begin(), slots.end(), off,
                                       [](std::size_t o, const Layout::Slot& sl) { return o < sl.offset; });
      if (it == slots.begin()) return false;
      const std::size_t s = static_cast<std::size_t>(it - slots.begin()) - 1;
      const auto& sl = slots[s];
      if (off >= sl.offset + sl.size || row_length(sl) != K || (off - sl.offset) % K != 0) return false;
      pieces.emplace_back(s, r);
      r += std::min(N - r, (sl.offset + sl.size - off) / K);
    }
    const std::size_t M = dy.shape[0];
    Factor dy_copy, x_copy;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
      const auto [s, r] = pieces[p];
      const std::size_t r_end = p + 1 < pieces.size() ? pieces[p + 1].second : N;
      if (!rules_.trained(slots[s].name)) continue;  // frozen: the gradient is never needed
      if (!dy_copy) dy_copy = keep_factor(dy.data, dy.size(), false), x_copy = keep_factor(x.data, x.size(), true);
      const std::size_t row0 = (begin + r * K - slots[s].offset) / K;
      products_[s].push_back(Product{row0, r_end - r, dy_copy, N, r, M, x_copy, !w.empty()});
    }
    return true;
  }

  /// A kept copy of n values at `data`; an X factor read from the same place as a recently kept
  /// one, still holding the same values, is shared (the gate and up projections read one input).
  /// Sharing depends on where the values came from, not on what they are, so a step's factors
  /// come in the same order and sizes every step, and their buffers, kept from step to step,
  /// are not allocated again after the first step.
  Factor keep_factor(const T* data, std::size_t n, bool share) {
    if (share)
      for (std::size_t back = 0; back < std::min<std::size_t>(6, factors_.size()); ++back) {
        const std::size_t i = factors_.size() - 1 - back;
        const auto& f = factors_[i];
        if (factor_sources_[i] == data && f->size() == n && std::memcmp(f->data(), data, n * sizeof(T)) == 0) return f;
      }
    if (pool_used_ == pool_.size()) pool_.push_back(std::make_shared<std::vector<T>>());
    auto& buffer = pool_[pool_used_++];
    buffer->assign(data, data + n);
    factors_.push_back(buffer);
    factor_sources_.push_back(data);
    return factors_.back();
  }

  /// Whether the gradient arena holds a value other than ±0 within [offset, offset + n). Only
  /// written pages are read; a page at a slot's edge may have been written for its neighbour
  /// (or in an earlier step: zero() keeps pages), and then holds zeros here, which add nothing
  /// to a gradient.
  bool holds_direct_values(std::size_t offset, std::size_t n) const {
    bool found = false;
    grads_.for_each_written_run(offset, n, [&](std::size_t begin, std::size_t end) {
      if (!found) found = std::any_of(grads_.data() + begin, grads_.data() + end, [](T g) { return g != T(0); });
    });
    return found;
  }

  /// The rows of slot s's next tile from row r0 (of `rows`, each `cols` long): up to
  /// tile_elements, ending where one of the slot's products starts or ends when one does within
  /// that reach, so that a tile meets each product whole (one product call per tile, no partial
  /// blocks of rows).
  std::size_t tile_rows_from(std::size_t s, std::size_t r0, std::size_t rows, std::size_t cols) const {
    const std::size_t reach = std::min(rows, r0 + std::max<std::size_t>(1, tile_elements / cols));
    std::size_t end = 0;
    for (const auto& p : products_[s])
      for (const std::size_t edge : {p.row0, p.row0 + p.rows})
        if (edge > r0 && edge <= reach) end = std::max(end, edge);
    return (end ? end : reach) - r0;
  }

  /// Rows [r0, r0 + nr) of slot s's gradient into `tile` (nr·K elements): D + Σ plain products
  /// + sign(W) ⊙ Σ |W| products, with `w` the same rows of the parameters. A product covering the
  /// whole tile, when nothing was written there before it, starts its sums from 0 itself (no
  /// pass of zeros first).
  void form_tile(std::size_t s, std::size_t r0, std::size_t nr, T* tile, const T* w) const {
    const auto& slot = grads_.layout().slots()[s];
    const std::size_t K = row_length(slot), n = nr * K;
    if (tile_abs_.size() < n) tile_abs_.resize(n);
    T* tile_abs = tile_abs_.data();
    bool tile_started = false, abs_started = false;
    const std::size_t at = slot.offset + r0 * K;
    if (holds_direct_values(at, n)) {  // only written pages are read
      parallel_fill(tile, n, T(0));
      tile_started = true;
      grads_.for_each_written_run(at, n, [&](std::size_t begin, std::size_t end) {
        std::copy(grads_.data() + begin, grads_.data() + end, tile + (begin - at));
      });
    }
    for (const auto& p : products_[s]) {
      const std::size_t a = std::max(r0, p.row0), b = std::min(r0 + nr, p.row0 + p.rows);
      if (a >= b) continue;
      T* out = p.abs ? tile_abs : tile;
      bool& started = p.abs ? abs_started : tile_started;
      const bool whole = a == r0 && b == r0 + nr;
      if (!started && !whole) parallel_fill(out, n, T(0));  // else every element is written below
      // out [b−a, K] (+)= dy[:, rows a…b of dW]ᵀ [b−a, m] · x [m, K]
      linalg::matmul<T>(linalg::Op::transposed, linalg::Op::plain, b - a, K, p.m, p.dy->data() + p.col0 + (a - p.row0),
                        p.dy_ld, p.x->data(), K, out + (a - r0) * K, K, started || !whole);
      started = true;
    }
    if (!tile_started) parallel_fill(tile, n, T(0));  // only |W| products (or none) here
    if (abs_started) add_signed(tile, tile_abs, w, n);
  }

  /// The scratch tile, room for n elements (grown, never shrunk: no allocation in steady state).
  T* scratch_tile(std::size_t n) const {
    if (tile_.size() < n) tile_.resize(n);
    return tile_.data();
  }

  /// Where grad_norm forms rows [r0, r0 + nr) of slot s (n elements): in the kept-tile buffer
  /// when the rest of it holds them (recorded for the step), else in the scratch tile.
  T* tile_for_norm(std::size_t s, std::size_t r0, std::size_t nr, std::size_t n) const {
    if (kept_used_ + n > kept_.size()) return scratch_tile(n);
    kept_tiles_.push_back(KeptTile{s, r0, nr, kept_used_});
    kept_used_ += n;
    return kept_.data() + (kept_used_ - n);
  }

  /// Forgets the kept tiles (their buffer stays).
  void forget_kept_tiles() const {
    kept_tiles_.clear();
    kept_used_ = 0;
    kept_for_ = nullptr;
  }

  /// Whether slot s's norm takes the Gram form (plain products only, nothing written directly).
  bool takes_gram_form(std::size_t s) const {
    const auto& slot = grads_.layout().slots()[s];
    return !holds_direct_values(slot.offset, slot.size) && gram_possible(products_[s]);
  }

  /// Before a norm: forgets the kept tiles, sizes their buffer to the trained tiled slots'
  /// elements within tile_cache_bytes (once per larger need) and ties the next tiles to
  /// `params` as it is now.
  void prepare_kept_tiles(const Arena<T>& params) const {
    forget_kept_tiles();
    if (tile_cache_bytes_ < sizeof(T)) return;
    std::size_t want = 0;
    const auto& slots = grads_.layout().slots();
    for (std::size_t s = 0; s < slots.size(); ++s)
      if (rules_.trained(slots[s].name) && !products_[s].empty() && !takes_gram_form(s)) want += slots[s].size;
    want = std::min(want, tile_cache_bytes_ / sizeof(T));
    if (kept_.size() < want) kept_ = PageBuffer<T>(want);
    kept_for_ = params.data();
    kept_version_ = params.version();
  }

  /// ‖slot s's gradient‖² (file comment); `w` is the slot's parameters (for sign(W)).
  double slot_norm2(std::size_t s, const T* w) const {
    const auto& slot = grads_.layout().slots()[s];
    const auto& products = products_[s];
    if (products.empty()) return direct_norm2(slot.offset, slot.size);
    if (takes_gram_form(s)) return gram_norm2(products);
    const std::size_t K = row_length(slot), rows = slot.size / K;
    double total = 0;
    for (std::size_t r0 = 0, nr = 0; r0 < rows; r0 += nr) {
      nr = tile_rows_from(s, r0, rows, K);
      T* tile = tile_for_norm(s, r0, nr, nr * K);  // [nr, K]
      form_tile(s, r0, nr, tile, w + r0 * K);
      total += sum_squares(tile, nr * K);
    }
    return total;
  }

  /// True when every product is plain and any two either share a row block or are disjoint.
  static bool gram_possible(const std::vector<Product>& products) {
    for (const auto& p : products)
      if (p.abs) return false;
    for (std::size_t i = 0; i < products.size(); ++i)
      for (std::size_t j = 0; j < i; ++j) {
        const auto &a = products[i], &b = products[j];
        const bool same = a.row0 == b.row0 && a.rows == b.rows;
        const bool disjoint = a.row0 + a.rows <= b.row0 || b.row0 + b.rows <= a.row0;
        if (!same && !disjoint) return false;
      }
    return true;
  }

  /// Σ over row blocks of ‖Σ_r dY_rᵀX_r‖² = Σ_ij (Σ_r dY_r·dY_sᵀ)(X_r·X_sᵀ), in double (the
  /// stacked factors and their Gram matrices in scratch kept between steps).
  double gram_norm2(const std::vector<Product>& products) const {
    double total = 0;
    auto& done = gram_done_;
    done.assign(products.size(), 0);
    for (std::size_t i = 0; i < products.size(); ++i) {
      if (done[i]) continue;
      auto& block = gram_block_;
      block.clear();
      for (std::size_t j = i; j < products.size(); ++j)
        if (!done[j] && products[j].row0 == products[i].row0 && products[j].rows == products[i].rows)
          block.push_back(&products[j]), done[j] = 1;
      std::size_t M = 0;
      for (auto* p : block) M += p->m;
      const std::size_t n = block.front()->rows, K = block.front()->x->size() / block.front()->m;
      // dy [M,n], x [M,K] stacked in double; g_dy = dy·dyᵀ, g_x = x·xᵀ [M,M]
      const std::size_t need = M * n + M * K + 2 * M * M;
      if (gram_scratch_.size() < need) gram_scratch_.resize(need);
      double *dy = gram_scratch_.data(), *x = dy + M * n, *g_dy = x + M * K, *g_x = g_dy + M * M;
      std::size_t row = 0;
      for (auto* p : block) {
        for (std::size_t r = 0; r < p->m; ++r) {
          const T* dy_row = p->dy->data() + r * p->dy_ld + p->col0;
          const T* x_row = p->x->data() + r * K;
          std::copy(dy_row, dy_row + n, dy + (row + r) * n);
          std::copy(x_row, x_row + K, x + (row + r) * K);
        }
        row += p->m;
      }
      linalg::matmul<double>(linalg::Op::plain, linalg::Op::transposed, M, M, n, dy, n, dy, n, g_dy, M, false);
      linalg::matmul<double>(linalg::Op::plain, linalg::Op::transposed, M, M, K, x, K, x, K, g_x, M, false);
      double sum = 0;
      for (std::size_t e = 0; e < M * M; ++e) sum += g_dy[e] * g_x[e];
      total += std::max(0.0, sum);
    }
    return total;
  }

  /// Σ g² over [offset, offset + n) of the gradient arena: per block of residency_block
  /// elements, the bits of sum_squares over the block, computed from the pages written only
  /// (the others hold 0, whose squares add exactly 0; reading them would make them resident;
  /// a block never written adds exactly 0 too).
  double direct_norm2(std::size_t offset, std::size_t n) const {
    constexpr std::size_t block = 4096, blocks = residency_block / block;  // add_sum_of_squares' blocks
    double total = 0;
    for (std::size_t b0 = 0; b0 < n; b0 += residency_block) {
      const std::size_t start = offset + b0, len = std::min(residency_block, n - b0);
      double lanes[blocks][8] = {};
      grads_.for_each_written_run(start, len, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
          const double g = static_cast<double>(grads_.data()[i]);
          lanes[(i - start) / block][(i - start) & 7] += g * g;
        }
      });
      double sum = 0;  // sum_squares of the block: its 4096-element block sums in order
      for (std::size_t b = 0; b * block < len; ++b) {
        const double* l = lanes[b];
        sum += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      }
      total += sum;
    }
    return total;
  }

  /// Σ x² in double (add_sum_of_squares: fixed blocks, thread-count independent).
  static double sum_squares(const T* x, std::size_t n) {
    double total = 0;
    add_sum_of_squares(x, n, total);
    return total;
  }

  /// Elements of a gradient tile (8 MB of floats: large GEMMs, still within the L3 cache).
  static constexpr std::size_t tile_elements = std::size_t{1} << 21;
  /// Elements per residency check of the on-demand gradient arena (1 MB of floats).
  static constexpr std::size_t residency_block = std::size_t{1} << 18;

  /// AdamW on a slot whose gradient lies in the arena; pages never written count as g = 0
  /// without being read.
  void update_direct(Arena<T>& params, const Layout::Slot& slot, const Coefficients& k) {
    for (std::size_t b0 = 0; b0 < slot.size; b0 += residency_block) {
      const std::size_t n = std::min(residency_block, slot.size - b0), off = slot.offset + b0;
      std::size_t done = off;  // elements before `done` are updated
      grads_.for_each_written_run(off, n, [&](std::size_t begin, std::size_t end) {
        if (begin > done) update_elements(params.data() + done, done, begin - done, k, nullptr);
        update_elements(params.data() + begin, begin, end - begin, k, grads_.data() + begin);
        done = end;
      });
      if (off + n > done) update_elements(params.data() + done, done, off + n - done, k, nullptr);
    }
  }

  /// The AdamW update of n elements starting at arena offset `off` with gradient g (null: 0)
  /// before grad_scale, in T arithmetic (AdamW's order).
  void update_elements(T* __restrict p, std::size_t off, std::size_t n, const Coefficients& k, const T* __restrict g) {
    if (g) update_kernel<true>(p, off, n, k, g);
    else update_kernel<false>(p, off, n, k, g);
  }

  /// update_elements with the gradient's presence known at compile time (branch-free loops).
  template <bool HasGrad>
  void update_kernel(T* __restrict p, std::size_t off, std::size_t n, const Coefficients& k, const T* __restrict g) {
    if (storage_ == MomentStorage::full) {
      T* m = m_.data() + off;
      T* v = v_.data() + off;
      parallel_chunks(n, [&](std::size_t begin, std::size_t end) {
        adamw_kernel<HasGrad>(end - begin, p + begin, HasGrad ? g + begin : nullptr, m + begin, v + begin, k);
      });
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      std::uint16_t* m = m16_.data() + off;
      std::uint16_t* v = v16_.data() + off;
      const std::uint64_t key = detail_adamw::rounding_key(t_);
      parallel_chunks(n, [&](std::size_t begin, std::size_t end) {
        adamw_kernel_bf16<HasGrad>(end - begin, p + begin, HasGrad ? g + begin : nullptr, m + begin, v + begin, k, key,
                                   off + begin);
      });
    }
  }

  AdamWConfig cfg_;
  ParamRules rules_;
  MomentStorage storage_;
  Arena<T> grads_;
  Arena<T> m_, v_;
  Arena<std::uint16_t> m16_, v16_;
  std::vector<std::vector<Product>> products_;  // per slot
  std::vector<Factor> factors_;
  std::vector<const T*> factor_sources_;  // where each factor was copied from
  // scratch kept between steps, so that a step in steady state allocates nothing
  std::vector<std::shared_ptr<std::vector<T>>> pool_;  // the factors' buffers; the first pool_used_ hold this step's
  std::size_t pool_used_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> pieces_;
  mutable std::vector<T> tile_, tile_abs_;
  // the tiles grad_norm kept for the step: where each lies in kept_, for which parameters
  struct KeptTile {
    std::size_t slot, row0, rows, at;
  };
  std::size_t tile_cache_bytes_ = 0;
  mutable PageBuffer<T> kept_;
  mutable std::vector<KeptTile> kept_tiles_;
  mutable std::size_t kept_used_ = 0;
  mutable const T* kept_for_ = nullptr;
  mutable std::uint64_t kept_version_ = 0;
  mutable std::vector<double> gram_scratch_;
  mutable std::vector<const Product*> gram_block_;
  mutable std::vector<unsigned char> gram_done_;
  std::uint64_t t_ = 0;
};

}  // namespace causalqwen::optim
