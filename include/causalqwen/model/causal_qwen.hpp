/// CausalQwen<T, Shapes>: NumericEmbedding → Qwen2 Transformer → Abduction → Action → losses,
/// evaluated (evaluate) or trained (train_step: forward, the losses' gradient, backward), all
/// parameters in one arena (Hugging Face names plus `causal.*`), laid out in that order:
/// model.embed_tokens.weight, causal.num_direction, model.layers.*, model.norm.weight,
/// causal.abduction.*, causal.action.*, causal.ovr_threshold.
///
///   CausalQwen<float>                         shapes from a CausalConfig at run time
///                                             (e.g. read from config.json)
///   CausalQwen<float, StaticConfig{…}>        shapes as compile-time constants (named fields),
///                                             checked by static_asserts with readable messages
/// Both share one implementation (CausalQwen<T, RuntimeConfig{}>).
#pragma once
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/linalg/weight_store.hpp"
#include "causalqwen/model/causal_head.hpp"
#include "causalqwen/model/config.hpp"
#include "causalqwen/model/numeric_embedding.hpp"
#include "causalqwen/nn/transformer.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace causalqwen::model {

/// Tag: the model's shapes are known only at run time.
struct RuntimeConfig {};

/// A model's shapes as compile-time constants, named as in CausalConfig and taken as a template
/// argument with designated initialisers (every field must be given; C = H):
///   CausalQwen<float, StaticConfig{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16,
///                                  .num_layers = 2, .num_heads = 4, .num_kv_heads = 2,
///                                  .causal_size = 8, .num_classes = 15, .num_token_id = 14}>
/// Inconsistent shapes do not compile (the checks are CausalQwen<T, StaticConfig>'s).
struct StaticConfig {
  std::size_t vocab_size = 0;
  std::size_t hidden_size = 0;        // H
  std::size_t intermediate_size = 0;  // F (SwiGLU width)
  std::size_t num_layers = 0;
  std::size_t num_heads = 0;     // query heads
  std::size_t num_kv_heads = 0;  // key/value heads (GQA groups)
  std::size_t causal_size = 0;   // C; must equal H
  std::size_t num_classes = 0;   // K ≤ vocab_size
  std::int64_t num_token_id = -1;  // <NUM>; must be < K

  /// head_dim = H / num_heads
  constexpr std::size_t head_dim() const { return num_heads ? hidden_size / num_heads : 0; }

  /// The same shapes as a CausalConfig (the other settings at their defaults).
  CausalConfig runtime() const {
    CausalConfig c;
    c.backbone = {vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, 1e-6, 1e6};
    c.causal_size = causal_size;
    c.num_classes = num_classes;
    c.num_token_id = num_token_id;
    return c;
  }
};

/// One batch, [B,S] each; empty views take their defaults (numeric_values 0, attention_mask
/// all 1, position_ids 0…S−1, target_values 0).
template <class T>
struct Batch {
  TensorView<const std::int64_t, 2> input_ids;
  TensorView<const T, 2> numeric_values;
  TensorView<const std::int64_t, 2> attention_mask;
  TensorView<const std::int64_t, 2> labels;
  TensorView<const T, 2> target_values;
  TensorView<const std::int64_t, 2> position_ids;
};

template <class T, auto Shapes = RuntimeConfig{}>
class CausalQwen;

template <class T>
class CausalQwen<T, RuntimeConfig{}> {
 public:
  struct Cache {
    typename NumericEmbedding<T>::Cache embedding;
    std::vector<T> e;  // [M,H] the embeddings
    typename nn::Transformer<T>::Cache backbone;
    typename CausalHead<T>::Cache head;
    std::vector<T> dz;  // [M,H] backward scratch
  };
  /// What incremental decoding keeps between steps (the backbone's KV cache and scratch).
  struct InferenceState {
    typename NumericEmbedding<T>::Cache embedding;
    std::vector<T> e;  // [M,H]
    typename nn::Transformer<T>::InferenceState backbone;
  };

  explicit CausalQwen(CausalConfig config, std::size_t class_chunk = 2048)
      : cfg_(validated(std::move(config))), backbone_(cfg_.backbone), head_(cfg_, class_chunk) {
    auto layout = std::make_shared<Layout>();
    NumericEmbedding<T>::add_params(*layout, cfg_.backbone.vocab_size, cfg_.hidden_size());
    backbone_.add_params(*layout);
    backbone_end_ = layout->total();
    add_head_params(*layout, cfg_);
    params_.reset(layout);
    for (const auto& w : backbone_.weight_matrices(params_)) weights_.add(params_, w);  // the layers' (forms_of_layers)
    weights_.add(params_, params_.template view<2>(names::cls_w));                       // W_cls (cls_index)
  }

  const CausalConfig& config() const { return cfg_; }
  const nn::Transformer<T>& backbone() const { return backbone_; }
  CausalHead<T>& head() { return head_; }
  /// Changes α of the regression gate for the next steps (see CausalHead::set_alpha_gate).
  void set_alpha_gate(double alpha) {
    head_.set_alpha_gate(alpha);
    cfg_.alpha_gate = alpha;
  }
  /// Changes λ of the regression loss for the next steps (see CausalHead::set_reg_loss_weight).
  void set_reg_loss_weight(double lambda) {
    head_.set_reg_loss_weight(lambda);
    cfg_.reg_loss_weight = lambda;
  }
  Arena<T>& params() { return params_; }
  const Arena<T>& params() const { return params_; }
  const Layout& layout() const { return params_.layout(); }
  /// A zeroed gradient arena with the parameters' layout.
  Arena<T> make_gradients() const { return Arena<T>(params_.shared_layout()); }

  /// A model trained from scratch: backbone N(0, std²) (norms 1), direction N(0,1), cls.weight
  /// N(0, std²), and the heads' inits (W_loc = I, scale_U = γ_init, …).
  void init_random(std::uint64_t seed, double std = 0.02) {
    nn::init_random(params_, seed, std, {names::num_direction});
    init_heads(params_, cfg_, seed);
    init_cls_random(params_, seed, std);
  }

  /// Forward only (evaluation): the loss parts and metrics for `batch`, no gradients kept or
  /// computed. The same values, to the bit, as train_step's.
  HeadMetrics evaluate(const Batch<T>& batch, Cache& cache, ActionMode mode = ActionMode::deterministic,
                       SamplingNoise<T> noise = {}) {
    check_batch(batch, false);
    const auto e = embed(batch.input_ids, batch.numeric_values, cache.embedding, cache.e);                  // [B,S,H]
    auto hp = begin_pass(cache, false);
    hp.action.cls_weight.abs = abs_cls();  // the class products of more than a few rows read it
    const auto z = backbone_.forward(params_, e, batch.attention_mask, batch.position_ids, cache.backbone);  // [B,S,H]
    return head_.forward(hp, z.flat2d(), targets_of(batch), mode, noise, cache.head);
  }

  /// One training step over `batch`: grads += ∂L_total/∂θ for every parameter (weight products
  /// offered to the target's sink first); returns the metrics. Its stages, as llm.c's loop:
  ///   e = embed(input_ids, numeric_values)             [B,S,H]
  ///   z = backbone.forward(e)                          [B,S,H]  (attention weights kept)
  ///   metrics, ∂L/∂A = heads.loss_and_gradient(z)      U, A [M,C]; Y [M]; S by chunks of classes
  ///   ∂L/∂z = heads.backward(∂L/∂A)                    [M,H]
  ///   ∂L/∂e = backbone.backward(∂L/∂z)                 [B,S,H]
  ///   embeddings.backward(∂L/∂e)
  /// The heads' gradient slots are final (grads.final_from) once heads.backward returns.
  HeadMetrics train_step(const Batch<T>& batch, Cache& cache, linalg::GradientTarget<T> grads,
                         ActionMode mode = ActionMode::deterministic, SamplingNoise<T> noise = {}) {
    detail::require(grads.arena.layout().total() == layout().total(), "CausalQwen::train_step",
                    "the gradient arena does not have the model's layout");
    const auto [B, S] = check_batch(batch, true);
    const std::size_t M = B * S, H = cfg_.hidden_size();
    const auto e = embed(batch.input_ids, batch.numeric_values, cache.embedding, cache.e);                  // [B,S,H]
    const auto hp = begin_pass(cache, true);
    const auto z = backbone_.forward(params_, e, batch.attention_mask, batch.position_ids, cache.backbone);  // [B,S,H]
    const auto g = HeadParams<T>::bind(grads.arena);
    const auto metrics = head_.loss_and_gradient(hp, z.flat2d(), targets_of(batch), mode, noise, cache.head, g, grads.sink);
    cache.dz.assign(M * H, T(0));
    head_.backward(hp, g, z.flat2d(), cache.head, {cache.dz.data(), {M, H}}, grads.sink);                   // dz [M,H]
    grads.final_from(backbone_end_);  // the heads' slots follow the stack's
    const auto de = backbone_.backward(params_, cache.backbone, TensorView<const T, 3>(cache.dz.data(), {B, S, H}), grads);  // [B,S,H]
    NumericEmbedding<T>::backward(NumericEmbedding<T>::Params::bind(grads.arena), cache.embedding, de);
    grads.final_from(0);
    return metrics;
  }

  /// The arithmetic of the large linear products in the forward passes of training and
  /// evaluation and in their backward: the decoder layers' (q|k|v, o, gate, up, down) and the
  /// class head's over W_cls (loc_S and scale_S of more than 16 positions): f32 (the default),
  /// or bf16 (mixed precision: each product rounds its two operands to bf16 and sums in float;
  /// the weights, gradients and optimiser, attention, the norms, the embeddings, the abduction
  /// and regression heads and the losses stay float). Float models only; int8 is refused.
  /// With bf16 and WeightCopies::kept (the default), the model also keeps a bf16 copy of the
  /// layers' matrices and of W_cls (2 bytes per weight), which an optimiser given update_follower() rewrites
  /// as it updates them; the products then read the copy instead of rounding the float weights
  /// at every use, with the same results (the model's linalg::WeightStore keeps them:
  /// linalg/weight_store.hpp).
  void set_precision(linalg::Format precision, linalg::WeightCopies copies = linalg::WeightCopies::kept) {
    weights_.set_precision(params_, precision, copies, "CausalQwen::set_precision");
  }
  linalg::Format precision() const { return weights_.precision(); }
  /// What an optimiser step keeps current as it updates the parameters (AdamW::step's
  /// `follower`): the bf16 copies of set_precision, or null when there are none.
  linalg::UpdateFollower<T>* update_follower() { return weights_.update_follower(); }
  /// Bytes of the bf16 copies of set_precision (0 without them).
  std::size_t bf16_copy_bytes() const { return weights_.bf16_copy_bytes(); }
  /// Whether the next forward's products read the bf16 copies (they hold the current weights).
  bool bf16_copies_current() const { return weights_.bf16_copies_current(params_.version()); }

  /// Stores the matrices that decoding reads once per token (every layer's q|k|v, o, gate, up
  /// and down projections, and W_cls) as `type` as well: bf16, or int8 with one scale per row
  /// (linalg/packed_weight.hpp; the model's WeightStore keeps them). Decoding steps
  /// (forward_cached and the decoding head, up to a few rows) then read the packed copies: half
  /// or a quarter of the bytes per token. The float weights are rounded in place to the same
  /// values, so that prefill's and evaluation's GEMMs compute with the numbers decoding reads
  /// (the float copy is kept). f32 drops the packed copies; the rounding stays. Float models
  /// only. When the parameters change afterwards, decoding refuses to run until this is called
  /// again.
  void use_weights(linalg::Format type) { weights_.use_weights(params_, type, "CausalQwen::use_weights"); }
  /// The type the decoding matrices are read in (use_weights).
  linalg::Format weight_type() const { return weights_.weight_type(); }
  /// Bytes of the packed copies (0 for f32).
  std::size_t packed_bytes() const { return weights_.packed_bytes(); }
  /// The heads' parameters for decoding `rows` rows at once: the arena's views, W_cls's packed
  /// copy when there is one and, beyond linalg::fused_rows_max rows (where the class products
  /// read |W| besides W), |W_cls| from the model's store.
  HeadParams<const T> head_params(std::size_t rows = 1) const {
    weights_.require_decoding_current(params_.version(), "CausalQwen::head_params");
    auto p = HeadParams<const T>::bind(params_);
    p.action.cls_weight.use_forms(weights_.decoding_forms(cls_index()));
    if (rows > linalg::fused_rows_max) p.action.cls_weight.abs = abs_cls();
    return p;
  }
  /// The heads' parameters as evaluate reads them (for CausalHead::full_vocabulary after an
  /// evaluate): W_cls with its products' forms at the current parameters, and |W_cls|.
  HeadParams<const T> evaluation_head_params() const {
    auto p = HeadParams<const T>::bind(params_);
    p.action.cls_weight.use_forms(weights_.training_forms(cls_index(), params_.version()));
    p.action.cls_weight.abs = abs_cls();
    return p;
  }
  /// |W_cls| [K,C] at the current parameters: the model's store makes it at the first request
  /// after they change (an optimiser step, a load) and keeps it while they do not.
  TensorView<const T, 2> abs_cls() const { return weights_.abs(params_, cls_index()); }
  /// Bytes of the |W| forms the store holds (|W_cls| once requested; 0 before).
  std::size_t abs_bytes() const { return weights_.abs_bytes(); }

  /// Starts an empty KV cache for `batch` rows with room for `slots` tokens per row.
  void begin_inference(InferenceState& state, std::size_t batch, std::size_t slots = 0) const {
    backbone_.begin_inference(state.backbone, batch, slots);
  }
  /// z [B,S,H] of S new tokens per row appended to the KV cache (nn::Transformer::forward_cached).
  TensorView<const T, 3> forward_cached(TensorView<const std::int64_t, 2> input_ids, TensorView<const T, 2> numeric_values,
                                        TensorView<const std::int64_t, 2> attention_mask,
                                        TensorView<const std::int64_t, 2> position_ids, InferenceState& state) const {
    weights_.require_decoding_current(params_.version(), "CausalQwen::forward_cached");
    const auto e = embed(input_ids, numeric_values, state.embedding, state.e);
    return backbone_.forward_cached(params_, e, attention_mask, position_ids, state.backbone,
                                    forms_of_layers(weights_.decoding_forms()));
  }

 private:
  /// The index of W_cls in weights_: it follows the layers' matrices.
  std::size_t cls_index() const { return nn::DecoderBlock<T>::num_weights * cfg_.backbone.num_layers; }
  /// The layers' entries of the forms of every registered matrix.
  std::span<const linalg::WeightForms> forms_of_layers(std::span<const linalg::WeightForms> all) const {
    return all.first(cls_index());
  }

  static CausalConfig validated(CausalConfig c) {
    c.validate("CausalQwen");
    return c;
  }

  /// e [B,S,H] = NumericEmbedding(ids, values), into `e`.
  TensorView<const T, 3> embed(TensorView<const std::int64_t, 2> ids, TensorView<const T, 2> values,
                               typename NumericEmbedding<T>::Cache& c, std::vector<T>& e) const {
    const std::size_t B = ids.shape[0], S = ids.shape[1], M = B * S, H = cfg_.hidden_size();
    if (!values.empty()) require_shape(values, {B, S}, "CausalQwen", "numeric_values");
    for (auto id : ids)
      detail::require(id >= 0 && static_cast<std::size_t>(id) < cfg_.backbone.vocab_size, "CausalQwen",
                      "input id {} is outside the vocabulary [0, {})", id, cfg_.backbone.vocab_size);
    e.resize(M * H);
    auto& p = const_cast<Arena<T>&>(params_);
    NumericEmbedding<T>::forward(NumericEmbedding<T>::Params::bind(p), ids.reshape(Shape<1>{M}),
                                 values.empty() ? TensorView<const T, 1>{} : values.reshape(Shape<1>{M}),
                                 TensorView<T, 2>(e.data(), {M, H}), c);
    return TensorView<const T, 3>(e.data(), {B, S, H});
  }

  /// Bytes that a forward pass over a [B,S] batch holds at least (M = B·S): per layer
  /// M·(4H + (nh + 2nkv)·D + nh·D + 3F) (the residual stream, the norms' outputs, q|k|v, the
  /// attention output and SwiGLU's three products), the heads' M·8C, and with backward the
  /// attention weights B·nh·S² of every layer. SizeError naming the batch when it overflows or
  /// passes the machine's memory.
  std::size_t require_forward_memory(std::size_t B, std::size_t S, bool backward) const {
    const auto& bb = cfg_.backbone;
    const auto what = [&] {  // built only for a refusal: a training step allocates nothing
      return fmt::format("the forward pass{} of a [B,S] = [{},{}] batch", backward ? " and backward" : "", B, S);
    };
    const std::size_t M = checked_mul(B, S, what);
    const std::size_t per_token = 4 * bb.hidden_size + bb.qkv_size() + bb.num_heads * bb.head_dim() +
                                  3 * bb.intermediate_size;
    std::size_t elements = checked_mul(checked_mul(M, per_token, what), bb.num_layers, what);
    elements = checked_add(elements, checked_mul(M, 8 * cfg_.causal_size, what), what);
    if (backward)
      elements = checked_add(elements, checked_product({B, bb.num_heads, S, S, bb.num_layers}, what), what);
    return require_elements<T>(elements, what);
  }

  /// The batch's shapes checked, and the memory of a pass over it (with backward or not); returns {B, S}.
  std::pair<std::size_t, std::size_t> check_batch(const Batch<T>& b, bool backward) const {
    const std::size_t B = b.input_ids.shape[0], S = b.input_ids.shape[1];
    detail::require(B > 0 && S > 0, "CausalQwen", "input_ids {} is empty", shape_text(b.input_ids.shape));
    require_forward_memory(B, S, backward);
    require_shape(b.labels, {B, S}, "CausalQwen", "labels");
    if (!b.target_values.empty()) require_shape(b.target_values, {B, S}, "CausalQwen", "target_values");
    return {B, S};
  }

  /// The batch's targets flattened over positions m = b·S + s ([M] each).
  static HeadTargets<T> targets_of(const Batch<T>& b) {
    const std::size_t M = b.labels.shape[0] * b.labels.shape[1];
    return {b.labels.reshape(Shape<1>{M}),
            b.target_values.empty() ? TensorView<const T, 1>{} : b.target_values.reshape(Shape<1>{M}),
            b.attention_mask.empty() ? TensorView<const std::int64_t, 1>{} : b.attention_mask.reshape(Shape<1>{M})};
  }

  /// Sets up a pass's products: the layers' (in cache.backbone) and W_cls's (in the returned
  /// heads' parameters) in the layers' precision; the stack keeps its attention weights only for
  /// a backward.
  HeadParams<const T> begin_pass(Cache& cache, bool backward) const {
    const auto forms = weights_.training_forms(params_.version());  // with the copies only while they hold the weights
    cache.backbone.forms = forms_of_layers(forms);
    cache.backbone.keep_for_backward = backward;  // an evaluation keeps no attention weights
    auto hp = HeadParams<const T>::bind(params_);
    hp.action.cls_weight.use_forms(forms[cls_index()]);  // W_cls's products in the layers' precision
    return hp;
  }

  CausalConfig cfg_;
  nn::Transformer<T> backbone_;
  CausalHead<T> head_;
  std::size_t backbone_end_ = 0;  // arena offset where the stack's slots end and the heads' begin
  Arena<T> params_;
  // every form of the layers' matrices and W_cls besides their values: the training products'
  // precision and bf16 copies (set_precision), the packed decoding copies (use_weights), |W_cls|
  // (abs_cls)
  linalg::WeightStore<T> weights_;
};

/// The compile-time-configured model: the same implementation, shapes fixed by Shapes, whose
/// inconsistencies stop compilation with one sentence each.
template <class T, StaticConfig Shapes>
class CausalQwen<T, Shapes> : public CausalQwen<T> {
  static_assert(Shapes.vocab_size > 0 && Shapes.hidden_size > 0 && Shapes.intermediate_size > 0 &&
                    Shapes.num_layers > 0 && Shapes.num_heads > 0 && Shapes.num_kv_heads > 0 &&
                    Shapes.num_classes > 0,
                "causalqwen::StaticConfig: every dimension must be positive.");
  static_assert(Shapes.causal_size == Shapes.hidden_size,
                "causalqwen::StaticConfig: the causal size C must equal the hidden size H, because the abduction network's W_loc is initialised to the identity.");
  static_assert(Shapes.num_heads == 0 || Shapes.hidden_size % Shapes.num_heads == 0,
                "causalqwen::StaticConfig: the hidden size must be divisible by the number of attention heads.");
  static_assert(Shapes.num_kv_heads == 0 || Shapes.num_heads % Shapes.num_kv_heads == 0,
                "causalqwen::StaticConfig: the number of attention heads must be divisible by the number of key/value heads (grouped-query attention).");
  static_assert(Shapes.head_dim() % 2 == 0,
                "causalqwen::StaticConfig: the head dimension must be even for rotary embeddings.");
  static_assert(Shapes.num_classes <= Shapes.vocab_size,
                "causalqwen::StaticConfig: there cannot be more OvR classes than embedding rows.");
  static_assert(Shapes.num_token_id >= 0 && static_cast<std::size_t>(Shapes.num_token_id) < Shapes.num_classes,
                "causalqwen::StaticConfig: the <NUM> token id must be one of the OvR classes.");

 public:
  static constexpr StaticConfig shapes = Shapes;
  static constexpr std::size_t hidden_size = Shapes.hidden_size, causal_size = Shapes.causal_size,
                               num_classes = Shapes.num_classes, vocab_size = Shapes.vocab_size;
  explicit CausalQwen(std::size_t class_chunk = 2048) : CausalQwen<T>(Shapes.runtime(), class_chunk) {}
  /// Settings other than shapes (thresholds, α, λ, …) may still be changed at run time.
  explicit CausalQwen(const CausalConfig& settings, std::size_t class_chunk = 2048)
      : CausalQwen<T>(with_static_shapes(settings), class_chunk) {}

 private:
  static CausalConfig with_static_shapes(CausalConfig c) {
    const auto s = Shapes.runtime();
    c.backbone.vocab_size = s.backbone.vocab_size;
    c.backbone.hidden_size = s.backbone.hidden_size;
    c.backbone.intermediate_size = s.backbone.intermediate_size;
    c.backbone.num_layers = s.backbone.num_layers;
    c.backbone.num_heads = s.backbone.num_heads;
    c.backbone.num_kv_heads = s.backbone.num_kv_heads;
    c.causal_size = s.causal_size;
    c.num_classes = s.num_classes;
    c.num_token_id = s.num_token_id;
    return c;
  }
};

}  // namespace causalqwen::model
