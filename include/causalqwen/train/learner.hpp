/// What the trainer trains, behind one interface (`Learner<T>`), so that the same loop, logs
/// and checkpoints serve both training paths:
///
///   ModelLearner<T>  the whole CausalQwen model on token batches (TokenBatchSource):
///                    backbone → heads → loss, forward and backward
///   HeadLearner<T>   the causal heads alone on feature batches (FeatureBatchSource): the
///                    synthetic-features mode (the backbone replaced by generated z, so the
///                    heads are studied alone and fast)
///
/// A learner owns nothing of the optimiser: it exposes its parameter arena, adds gradients of
/// the next batch, evaluates validation batches, and saves/loads its parameters exactly.
#pragma once
#include "causalqwen/checkpoint/model_config.hpp"
#include "causalqwen/checkpoint/model_checkpoint.hpp"
#include "causalqwen/format/safetensors.hpp"
#include "causalqwen/format/safetensors_writer.hpp"
#include "causalqwen/model/causal_head.hpp"
#include "causalqwen/model/causal_qwen.hpp"
#include "causalqwen/train/batch_source.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

namespace causalqwen::train {

/// The metrics of one micro-batch and the number of tokens it held (attention mask 1).
struct MicroBatchResult {
  model::HeadMetrics metrics;
  std::size_t tokens = 0;
};

/// How the training forward pass sees noise: deterministic (noise on the scale, the default),
/// or sampling with temperature T (noise on the location, uniforms drawn from the trainer's RNG).
struct TrainNoise {
  model::ActionMode mode = model::ActionMode::deterministic;
  double temperature = 1.0;
};

template <class T>
class Learner {
 public:
  virtual ~Learner() = default;
  virtual Arena<T>& params() = 0;
  /// What the optimiser keeps current as it updates params() (the model's bf16 copies in mixed
  /// precision; null: nothing).
  virtual linalg::UpdateFollower<T>* update_follower() { return nullptr; }
  /// A zeroed gradient arena with the parameters' layout.
  virtual Arena<T> make_gradients() const = 0;
  /// Sets α of the regression gate for the following batches.
  virtual void set_alpha_gate(double alpha) = 0;
  /// λ of L_total = L_cls_mean + λ·L_reg_eff.
  virtual double reg_loss_weight() const = 0;
  /// Sets λ for the following batches.
  virtual void set_reg_loss_weight(double lambda) = 0;
  /// Draws the next training batch; grads += ∂L_total/∂θ on it. Sampling noise, if any, comes
  /// from `rng` (uniforms in (0,1), row-major [M,C]).
  virtual MicroBatchResult train_micro_batch(linalg::GradientTarget<T> grads, const TrainNoise& noise, std::mt19937_64& rng) = 0;
  /// Draws the next training batch and its sampling noise as train_micro_batch would, and
  /// computes nothing: with data parallelism another process trains on it, and every process
  /// keeps the same data position and RNG state.
  virtual void skip_micro_batch(const TrainNoise& noise, std::mt19937_64& rng) = 0;
  virtual bool has_validation() const = 0;
  /// Rewinds the validation source to where it started (every evaluation sees the same batches).
  virtual void rewind_validation() = 0;
  /// Forward only (deterministic mode) on the next validation batch.
  virtual MicroBatchResult eval_micro_batch() = 0;
  /// Draws the next validation batch and evaluates nothing (another process does).
  virtual void skip_eval_micro_batch() = 0;
  /// The training source's position ({"train": state}); restored on resume.
  virtual nlohmann::json data_state() const = 0;
  virtual void restore_data_state(const nlohmann::json& state) = 0;
  /// Writes the parameters into `dir` so that load_params(dir) restores them bit for bit.
  virtual void save_model(const std::filesystem::path& dir) const = 0;
  virtual void load_params(const std::filesystem::path& dir) = 0;
};

namespace detail_learner {
/// Uniforms in (0, 1) for the sampling mode, [M·C], from the trainer's RNG.
template <class T>
void draw_uniforms(std::vector<T>& out, std::size_t n, std::mt19937_64& rng) {
  out.resize(n);
  for (auto& u : out) {
    // 53 random bits → (0, 1), never 0 or 1 once cast: (k + 0.5)/2^53
    const double v = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
    u = static_cast<T>(std::clamp(v, 1e-7, 1.0 - 1e-7));
  }
}

/// Reads every slot of `params` from the safetensors file `file` (names = slot names).
template <class T>
void read_slots(const std::filesystem::path& file, Arena<T>& params, const std::string& prefix = "") {
  const auto st = format::SafetensorsFile::open(file);
  for (const auto& s : params.layout().slots())
    st.template read<T>(prefix + s.name, std::span<T>(params.data() + s.offset, s.size));
  params.touch();
}

/// Adds every slot of `params` to `writer` in T's own dtype (exact).
template <class T>
void add_slots(format::SafetensorsWriter& writer, const Arena<T>& params, const std::string& prefix = "") {
  for (const auto& s : params.layout().slots()) {
    if constexpr (std::is_same_v<T, float>)
      writer.add(prefix + s.name, s.shape, std::span<const float>(params.data() + s.offset, s.size));
    else
      writer.add(prefix + s.name, s.shape, std::span<const double>(params.data() + s.offset, s.size));
  }
}
}  // namespace detail_learner

/// The whole model on token batches. `config_base` and `lm_head` are passed to checkpoint::save_model
/// (the keys of the config.json read at load, an untied base's lm_head).
template <class T>
class ModelLearner final : public Learner<T> {
 public:
  ModelLearner(model::CausalQwen<T>& m, TokenBatchSource<T>& train, TokenBatchSource<T>* val = nullptr,
               nlohmann::json config_base = nlohmann::json::object(), std::vector<float> lm_head = {})
      : model_(m), train_(train), val_(val), config_base_(std::move(config_base)), lm_head_(std::move(lm_head)) {
    if (val_) val_start_ = val_->state();
  }

  Arena<T>& params() override { return model_.params(); }
  linalg::UpdateFollower<T>* update_follower() override { return model_.update_follower(); }
  Arena<T> make_gradients() const override { return model_.make_gradients(); }
  void set_alpha_gate(double alpha) override { model_.set_alpha_gate(alpha); }
  double reg_loss_weight() const override { return model_.config().reg_loss_weight; }
  void set_reg_loss_weight(double lambda) override { model_.set_reg_loss_weight(lambda); }

  MicroBatchResult train_micro_batch(linalg::GradientTarget<T> grads, const TrainNoise& noise, std::mt19937_64& rng) override {
    batch_ = train_.next();
    model::SamplingNoise<T> sn;
    if (noise.mode == model::ActionMode::sampling) {
      const std::size_t M = batch_.batch * batch_.seq, C = model_.config().causal_size;
      detail_learner::draw_uniforms(uniforms_, M * C, rng);
      sn = {static_cast<T>(noise.temperature), {uniforms_.data(), {M, C}}};
    }
    const auto m = model_.train_step(batch_.view(), cache_, grads, noise.mode, sn);
    return {m, tokens_of(batch_)};
  }
  void skip_micro_batch(const TrainNoise& noise, std::mt19937_64& rng) override {
    batch_ = train_.next();
    if (noise.mode == model::ActionMode::sampling)
      detail_learner::draw_uniforms(uniforms_, batch_.batch * batch_.seq * model_.config().causal_size, rng);
  }

  bool has_validation() const override { return val_ != nullptr; }
  void rewind_validation() override {
    if (val_) val_->restore(val_start_);
  }
  MicroBatchResult eval_micro_batch() override {
    batch_ = val_->next();
    return {model_.evaluate(batch_.view(), cache_), tokens_of(batch_)};
  }
  void skip_eval_micro_batch() override { batch_ = val_->next(); }

  nlohmann::json data_state() const override { return {{"train", train_.state()}}; }
  void restore_data_state(const nlohmann::json& state) override { train_.restore(state.at("train")); }

  /// config.json + model.safetensors (F32, loadable by checkpoint::load_model); for T ≠ float also
  /// params_exact.safetensors in T's dtype, which load_params prefers.
  void save_model(const std::filesystem::path& dir) const override {
    checkpoint::save_model(dir, model_, config_base_, lm_head_);
    if constexpr (!std::is_same_v<T, float>) {
      format::SafetensorsWriter w;
      detail_learner::add_slots(w, model_.params());
      w.write(dir / "params_exact.safetensors");
    }
  }
  void load_params(const std::filesystem::path& dir) override {
    const auto exact = dir / "params_exact.safetensors";
    detail_learner::read_slots(std::filesystem::exists(exact) ? exact : dir / "model.safetensors", model_.params());
  }

 private:
  static std::size_t tokens_of(const BatchData<T>& b) {
    if (b.attention_mask.empty()) return b.batch * b.seq;
    std::size_t n = 0;
    for (auto v : b.attention_mask) n += v != 0;
    return n;
  }

  model::CausalQwen<T>& model_;
  TokenBatchSource<T>& train_;
  TokenBatchSource<T>* val_;
  nlohmann::json config_base_, val_start_;
  std::vector<float> lm_head_;
  BatchData<T> batch_;
  typename model::CausalQwen<T>::Cache cache_;
  std::vector<T> uniforms_;
};

/// The causal heads alone on feature batches (z [M,H] supplied by the source). Owns its
/// parameter arena (the `causal.*` head slots of a checkpoint), initialised as the model's heads: W_loc = I,
/// scale_U = γ_init, W_cls ~ N(0, cls_std²), …
template <class T>
class HeadLearner final : public Learner<T> {
 public:
  HeadLearner(const model::CausalConfig& cfg, FeatureBatchSource<T>& train, FeatureBatchSource<T>* val,
              std::uint64_t seed, double cls_std = 0.02)
      : cfg_(cfg), head_(cfg), train_(train), val_(val) {
    auto layout = std::make_shared<Layout>();
    model::add_head_params(*layout, cfg_);
    layout_ = layout;
    params_.reset(layout_);
    model::init_heads(params_, cfg_, seed);
    model::init_cls_random(params_, seed, cls_std);
    weights_.add(params_, params_.template view<2>(model::names::cls_w));  // for |W_cls|
    if (val_) val_start_ = val_->state();
  }

  model::CausalHead<T>& head() { return head_; }
  Arena<T>& params() override { return params_; }
  Arena<T> make_gradients() const override { return Arena<T>(layout_); }
  void set_alpha_gate(double alpha) override { head_.set_alpha_gate(alpha); }
  double reg_loss_weight() const override { return cfg_.reg_loss_weight; }
  void set_reg_loss_weight(double lambda) override {
    head_.set_reg_loss_weight(lambda);
    cfg_.reg_loss_weight = lambda;
  }

  MicroBatchResult train_micro_batch(linalg::GradientTarget<T> grads, const TrainNoise& noise, std::mt19937_64& rng) override {
    batch_ = train_.next();
    check(batch_);
    const std::size_t M = batch_.rows, H = batch_.hidden, C = cfg_.causal_size;
    model::SamplingNoise<T> sn;
    if (noise.mode == model::ActionMode::sampling) {
      detail_learner::draw_uniforms(uniforms_, M * C, rng);
      sn = {static_cast<T>(noise.temperature), {uniforms_.data(), {M, C}}};
    }
    dz_.assign(M * H, T(0));
    const auto g = model::HeadParams<T>::bind(grads.arena);
    const Arena<T>& cp = params_;
    const auto p = model::HeadParams<const T>::bind(cp);
    const TensorView<const T, 2> z(batch_.features.data(), {M, H});  // [M,H]
    const auto m = head_.loss_and_gradient(p, z, targets(batch_), noise.mode, sn, cache_, g, grads.sink);
    head_.backward(p, g, z, cache_, {dz_.data(), {M, H}}, grads.sink);  // dz [M,H]: nothing lies below the features
    return {m, M};
  }
  void skip_micro_batch(const TrainNoise& noise, std::mt19937_64& rng) override {
    batch_ = train_.next();
    check(batch_);
    if (noise.mode == model::ActionMode::sampling) detail_learner::draw_uniforms(uniforms_, batch_.rows * cfg_.causal_size, rng);
  }

  bool has_validation() const override { return val_ != nullptr; }
  void rewind_validation() override {
    if (val_) val_->restore(val_start_);
  }
  MicroBatchResult eval_micro_batch() override {
    batch_ = val_->next();
    check(batch_);
    const Arena<T>& cp = params_;
    auto p = model::HeadParams<const T>::bind(cp);
    p.action.cls_weight.abs = weights_.abs(params_, 0);  // |W_cls|, remade after each update
    const auto m = head_.forward(p, {batch_.features.data(), {batch_.rows, batch_.hidden}}, targets(batch_),
                                 model::ActionMode::deterministic, {}, cache_);
    return {m, batch_.rows};
  }
  void skip_eval_micro_batch() override { batch_ = val_->next(); }

  nlohmann::json data_state() const override { return {{"train", train_.state()}}; }
  void restore_data_state(const nlohmann::json& state) override { train_.restore(state.at("train")); }

  /// config.json (the heads' settings) + heads.safetensors (the head slots in T's dtype).
  void save_model(const std::filesystem::path& dir) const override {
    std::filesystem::create_directories(dir);
    format::SafetensorsWriter w;
    w.set_metadata("producer", "causalqwen");
    w.set_metadata("content", "causal heads only (synthetic-features mode)");
    detail_learner::add_slots(w, params_);
    w.write(dir / "heads.safetensors");
    checkpoint::write_config_json(dir / "config.json", cfg_);
  }
  void load_params(const std::filesystem::path& dir) override {
    detail_learner::read_slots(dir / "heads.safetensors", params_);
  }

 private:
  void check(const FeatureBatch<T>& b) const {
    detail::require(b.hidden == cfg_.hidden_size() && b.features.size() == b.rows * b.hidden &&
                        b.labels.size() == b.rows && (b.target_values.empty() || b.target_values.size() == b.rows),
                    "HeadLearner", "a feature batch must hold rows×{} features, rows labels and rows target values "
                    "(got rows {}, hidden {}, {} features, {} labels, {} values)",
                    cfg_.hidden_size(), b.rows, b.hidden, b.features.size(), b.labels.size(), b.target_values.size());
  }
  static model::HeadTargets<T> targets(const FeatureBatch<T>& b) {
    return {{b.labels.data(), {b.rows}},
            b.target_values.empty() ? TensorView<const T, 1>{} : TensorView<const T, 1>{b.target_values.data(), {b.rows}},
            {}};
  }

  model::CausalConfig cfg_;
  model::CausalHead<T> head_;
  FeatureBatchSource<T>& train_;
  FeatureBatchSource<T>* val_;
  nlohmann::json val_start_;
  std::shared_ptr<const Layout> layout_;
  Arena<T> params_;
  linalg::WeightStore<T> weights_;  // |W_cls| for the evaluation's class products
  FeatureBatch<T> batch_;
  typename model::CausalHead<T>::Cache cache_;
  std::vector<T> dz_, uniforms_;
};

}  // namespace causalqwen::train
