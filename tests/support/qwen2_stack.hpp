// A Qwen2 stack with CausalQwen's numeric embedding in front and no heads, for the nn-level
// tests: e = NumericEmbedding(ids, values) → nn::Transformer → z, with its own parameter arena
// (model.embed_tokens.weight, causal.num_direction, model.layers.*, model.norm.weight).
#pragma once
#include <causalqwen/model/numeric_embedding.hpp>
#include <causalqwen/nn/transformer.hpp>

#include <memory>
#include <vector>

namespace cqtest {

template <class T>
class Qwen2Stack {
 public:
  using Embedding = causalqwen::model::NumericEmbedding<T>;
  using Transformer = causalqwen::nn::Transformer<T>;
  template <class V, std::size_t N>
  using View = causalqwen::TensorView<V, N>;

  struct Cache {
    typename Embedding::Cache embedding;
    std::vector<T> e;
    typename Transformer::Cache backbone;
  };
  struct InferenceState {
    typename Embedding::Cache embedding;
    std::vector<T> e;
    typename Transformer::InferenceState backbone;
  };

  explicit Qwen2Stack(causalqwen::nn::TransformerConfig config) : stack_(config) {
    auto layout = std::make_shared<causalqwen::Layout>();
    Embedding::add_params(*layout, config.vocab_size, config.hidden_size);
    stack_.add_params(*layout);
    params_.reset(layout);
  }
  causalqwen::Arena<T>& params() { return params_; }
  causalqwen::Arena<T> make_gradients() const { return causalqwen::Arena<T>(params_.shared_layout()); }
  template <std::size_t N>
  View<T, N> param(const std::string& name) { return params_.template view<N>(name); }
  void init_random(std::uint64_t seed, double std = 0.02) {
    causalqwen::nn::init_random(params_, seed, std, {causalqwen::model::names::num_direction});
  }

  View<const T, 3> forward(View<const std::int64_t, 2> ids, View<const T, 2> values, View<const std::int64_t, 2> mask,
                           View<const std::int64_t, 2> positions, Cache& c) {
    return stack_.forward(params_, embed(ids, values, c.embedding, c.e), mask, positions, c.backbone);
  }
  void backward(Cache& c, View<const T, 3> dz, causalqwen::Arena<T>& grads, View<T, 2> dvalues = {}) {
    const auto de = stack_.backward(params_, c.backbone, dz, grads);
    Embedding::backward(Embedding::Params::bind(grads), c.embedding, de,
                        dvalues.empty() ? View<T, 1>{} : dvalues.reshape(causalqwen::Shape<1>{dvalues.size()}));
  }
  void begin_inference(InferenceState& s, std::size_t batch, std::size_t slots = 0) {
    stack_.begin_inference(s.backbone, batch, slots);
  }
  View<const T, 3> forward_cached(View<const std::int64_t, 2> ids, View<const T, 2> values, View<const std::int64_t, 2> mask,
                                  View<const std::int64_t, 2> positions, InferenceState& s) {
    return stack_.forward_cached(params_, embed(ids, values, s.embedding, s.e), mask, positions, s.backbone);
  }

 private:
  View<const T, 3> embed(View<const std::int64_t, 2> ids, View<const T, 2> values, typename Embedding::Cache& c,
                         std::vector<T>& e) {
    const std::size_t B = ids.shape[0], S = ids.shape[1], M = B * S, H = stack_.config().hidden_size;
    e.assign(M * H, T(0));
    Embedding::forward(Embedding::Params::bind(params_), ids.reshape(causalqwen::Shape<1>{M}),
                       values.empty() ? View<const T, 1>{} : values.reshape(causalqwen::Shape<1>{M}), View<T, 2>(e.data(), {M, H}), c);
    return View<const T, 3>(e.data(), {B, S, H});
  }

  Transformer stack_;
  causalqwen::Arena<T> params_;
};

}  // namespace cqtest
