/// The one owner of the forms of a parameter arena's weight matrices besides their values
/// (linalg/weight.hpp: WeightForms). A model registers its matrices once (add); the store then
/// makes, keeps and hands out, per matrix i:
///   training   the arithmetic of the training products (set_precision: f32, or bf16 = mixed
///              precision) and, with WeightCopies::kept, a bf16 copy bf16(W_i) that the
///              optimiser keeps current (the store owns the Bf16Copies, its UpdateFollower):
///                training_forms(version) = copies  while they hold the parameters at `version`
///                                          rounding (bf16 products, no copy) otherwise
///   decoding   a packed bf16 or int8 copy read by decoding (use_weights: PackedMatrix), valid
///              while the arena is at the version it was packed at (decoding_current)
///   |W|        on request (abs): |W_i| for the scale products of the Cauchy linear map
///              (abs_weight.hpp), made at the first request and remade at a request after the
///              arena's version moved on; float and double
/// and the bytes of each kind. A new storage format is a Format, a branch here and its kernels:
/// the layers and the model only pass the forms on. Float arenas only for every form but f32
/// and |W|: a double store refuses bf16 products and packed copies.
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/tensor.hpp"
#include "causalqwen/linalg/abs_weight.hpp"
#include "causalqwen/linalg/bf16_copies.hpp"
#include "causalqwen/linalg/bf16_gemm.hpp"
#include "causalqwen/linalg/format.hpp"
#include "causalqwen/linalg/gemm.hpp"
#include "causalqwen/linalg/packed_weight.hpp"
#include "causalqwen/linalg/update_follower.hpp"
#include "causalqwen/linalg/weight.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <vector>

namespace causalqwen::linalg {

template <class T>
class WeightStore {
 public:
  // ------------------------------------------------------------------ registration
  /// Registers w [N,C], a view of `params` that may span consecutive slots of C columns each
  /// (q|k|v), and returns its index i (0, 1, … in the order of registration). Its forms start
  /// as none (no copies; products in the store's precision) until set_precision or
  /// use_weights; registering after either has made copies is refused.
  std::size_t add(const Arena<T>& params, TensorView<const T, 2> w) {
    const std::size_t rows = w.shape[0], cols = w.shape[1];
    const auto offset = static_cast<std::size_t>(w.data - params.data());
    detail::require(w.data >= params.data() && offset + rows * cols <= params.size(), "WeightStore::add",
                    "the matrix {} is not a view of the parameter arena", shape_text(w.shape));
    detail::require(arena_size_ == 0 || arena_size_ == params.size(), "WeightStore::add",
                    "the matrix is in an arena of {} values, the store's holds {}", params.size(), arena_size_);
    detail::require(!bf16_copies_ && packed_.empty(), "WeightStore::add",
                    "matrices are registered before set_precision keeps bf16 copies and use_weights packs them");
    arena_size_ = params.size();
    matrices_.push_back({offset, w.shape});
    rounding_.push_back(WeightForms{.precision = precision_});
    decode_.emplace_back();
    abs_.emplace_back();
    return matrices_.size() - 1;
  }
  /// Registered matrices.
  std::size_t size() const { return matrices_.size(); }
  /// Shape [N,C] of matrix i.
  const Shape<2>& shape(std::size_t i) const { return matrices_.at(i).shape; }

  // ------------------------------------------------------------------ training
  /// The arithmetic of the training products over every registered matrix: f32, or bf16
  /// (each product rounds its operands to bf16 and sums in float; float arenas only; int8 is
  /// refused, as `fn`). bf16 with WeightCopies::kept also keeps bf16 copies of the matrices (2
  /// bytes per weight, in rows where oneDNN runs the products, else in our kernels' panels),
  /// which an optimiser given update_follower() rewrites as it updates them.
  void set_precision(const Arena<T>& params, Format precision, WeightCopies copies = WeightCopies::kept,
                     const char* fn = "WeightStore::set_precision") {
    require_precision_fits<T>(precision, fn);
    require_arena(params, fn);
    precision_ = precision;
    bf16_copies_.reset();
    copies_.clear();
    for (auto& f : rounding_) f = WeightForms{.precision = precision};
    if constexpr (std::is_same_v<T, float>) {
      if (precision == Format::bf16 && copies == WeightCopies::kept) {
        bf16_copies_ = std::make_unique<Bf16Copies>(bf16_products_on_onednn() ? detail_bf16::PackLayout::rows
                                                                              : detail_bf16::PackLayout::panels);
        copies_ = rounding_;
        for (std::size_t i = 0; i < matrices_.size(); ++i) copies_[i].bf16_copy = bf16_copies_->add(params, view(params, i));
      }
    }
  }
  /// The arithmetic of the training products (set_precision).
  Format precision() const { return precision_; }
  /// What an optimiser step keeps current as it updates the parameters: the bf16 copies of
  /// set_precision, or null when there are none.
  UpdateFollower<T>* update_follower() {
    if constexpr (std::is_same_v<T, float>) return bf16_copies_.get();
    return nullptr;
  }
  /// Bytes of the bf16 copies (0 without them).
  std::size_t bf16_copy_bytes() const { return bf16_copies_ ? bf16_copies_->bytes() : 0; }
  /// Whether the bf16 copies hold the parameters at `version` (Arena::version()).
  bool bf16_copies_current(std::uint64_t version) const {
    return bf16_copies_ && precision_ == Format::bf16 && bf16_copies_->current(version);
  }
  /// The forms of every matrix (in order of registration) for the training products over the
  /// parameters at `version`: with the bf16 copies while they are current, else without.
  std::span<const WeightForms> training_forms(std::uint64_t version) const {
    return bf16_copies_current(version) ? std::span<const WeightForms>(copies_) : std::span<const WeightForms>(rounding_);
  }
  /// Matrix i's forms for training at `version` (training_forms(version)[i]).
  const WeightForms& training_forms(std::size_t i, std::uint64_t version) const { return training_forms(version)[at(i)]; }

  // ------------------------------------------------------------------ decoding
  /// Packs every registered matrix as `type` for decoding: bf16, or int8 with one scale per row
  /// (packed_weight.hpp), and rounds its float values in `params` in place to the same values
  /// (round_weights), so that float products over them compute with the numbers decoding reads;
  /// the arena's version moves on, and the copies are current at the new one. f32 drops the
  /// copies (the rounding stays). Float arenas only for bf16 and int8 (refused as `fn`).
  void use_weights(Arena<T>& params, Format type, const char* fn = "WeightStore::use_weights") {
    detail::require(type == Format::f32 || std::is_same_v<T, float>, fn, "{} weights serve float models only", format_name(type));
    require_arena(params, fn);
    packed_.clear();
    for (auto& f : decode_) f = WeightForms{};
    weight_type_ = type;
    if constexpr (std::is_same_v<T, float>) {
      if (type != Format::f32) {
        packed_.reserve(matrices_.size());
        for (std::size_t i = 0; i < matrices_.size(); ++i) {
          const auto w = view(params, i);
          round_weights(type, w);
          decode_[i].decode = packed_.emplace_back(type, TensorView<const float, 2>(w)).ref();
        }
        params.touch();
      }
    }
    packed_version_ = params.version();
  }
  /// The format decoding's copies are stored in (use_weights; f32: none).
  Format weight_type() const { return weight_type_; }
  /// Bytes of the packed copies (0 for f32).
  std::size_t packed_bytes() const {
    std::size_t n = 0;
    for (const auto& m : packed_) n += m.bytes();
    return n;
  }
  /// Whether decoding may read the forms at `version`: no packed copies, or the parameters
  /// unchanged since use_weights packed them.
  bool decoding_current(std::uint64_t version) const { return weight_type_ == Format::f32 || packed_version_ == version; }
  /// Refuses, as `fn`, decoding the parameters at `version` with stale packed copies.
  void require_decoding_current(std::uint64_t version, const char* fn) const {
    detail::require(decoding_current(version), fn,
                    "the parameters changed after use_weights({}) packed them: call use_weights again", format_name(weight_type_));
  }
  /// The forms of every matrix (in order of registration) for decoding: the packed copies.
  std::span<const WeightForms> decoding_forms() const { return decode_; }
  /// Matrix i's forms for decoding.
  const WeightForms& decoding_forms(std::size_t i) const { return decode_[at(i)]; }

  // ------------------------------------------------------------------ |W|
  /// |W_i| [N,C] of matrix i in `params` at its current version (Arena::version()): made at the
  /// first request, remade at a request after the version moved on (an optimiser step, a load,
  /// use_weights' rounding), returned as it is while current; its buffer is kept, so a request
  /// allocates only the first time (huge pages when large: abs_weight.hpp). A form the store
  /// keeps for its callers (hence const); requests from several threads are serialised.
  TensorView<const T, 2> abs(const Arena<T>& params, std::size_t i) const {
    require_arena(params, "WeightStore::abs");
    const std::lock_guard<std::mutex> hold(*abs_lock_);
    return abs_[at(i)].get(TensorView<const T, 2>(view(params, i)), params.version());
  }
  /// Bytes of the |W| forms made so far.
  std::size_t abs_bytes() const {
    const std::lock_guard<std::mutex> hold(*abs_lock_);
    std::size_t n = 0;
    for (const auto& a : abs_) n += a.bytes();
    return n;
  }
  /// How many times |W_i| was made (for tests and diagnostics).
  std::uint64_t abs_rebuilds(std::size_t i) const {
    const std::lock_guard<std::mutex> hold(*abs_lock_);
    return abs_[at(i)].rebuilds();
  }

 private:
  struct Matrix {
    std::size_t offset = 0;  // of row 0, in the arena
    Shape<2> shape{};        // [N,C]
  };

  std::size_t at(std::size_t i) const {
    detail::require(i < matrices_.size(), "WeightStore", "no matrix {}: {} are registered", i, matrices_.size());
    return i;
  }
  void require_arena(const Arena<T>& params, const char* fn) const {
    detail::require(matrices_.empty() || params.size() == arena_size_, fn,
                    "the arena holds {} values, the store's matrices were registered in one of {}", params.size(), arena_size_);
  }
  /// Matrix i in `params` [N,C].
  TensorView<T, 2> view(const Arena<T>& params, std::size_t i) const {
    const Matrix& m = matrices_[i];
    return TensorView<T, 2>(const_cast<T*>(params.data()) + m.offset, m.shape);
  }

  std::vector<Matrix> matrices_;
  std::size_t arena_size_ = 0;
  // training (set_precision)
  Format precision_ = Format::f32;
  std::unique_ptr<Bf16Copies> bf16_copies_;  // the optimiser's UpdateFollower
  std::vector<WeightForms> rounding_;        // per matrix: the precision, no copy
  std::vector<WeightForms> copies_;          // per matrix: the precision and its bf16 copy (empty: none kept)
  // decoding (use_weights)
  Format weight_type_ = Format::f32;
  std::uint64_t packed_version_ = 0;
  std::vector<PackedMatrix> packed_;
  std::vector<WeightForms> decode_;  // per matrix: its packed copy
  // |W| (abs): per matrix, made on request; a cache behind a const interface, so locked
  mutable std::vector<AbsWeightCache<T>> abs_;
  std::unique_ptr<std::mutex> abs_lock_ = std::make_unique<std::mutex>();
};

}  // namespace causalqwen::linalg
