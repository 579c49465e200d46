/// The static tape: a model whose stage sequence is known at compile time runs forward as a
/// left fold over its stages and backward as a right fold, with no per-step allocation or
/// dispatch. A stage is any type with `forward(Context&)` and `backward(Context&)`; the
/// context holds the parameters, caches and gradients the stages share.
#pragma once
#include <cstddef>
#include <tuple>
#include <utility>

namespace causalqwen::autodiff {

template <class S, class Context>
concept Stage = requires(S& s, Context& c) {
  s.forward(c);
  s.backward(c);
};

template <class... Stages>
class StaticTape {
 public:
  StaticTape() = default;
  explicit StaticTape(Stages... stages) : stages_(std::move(stages)...) {}

  static constexpr std::size_t size() { return sizeof...(Stages); }

  /// stage₀.forward(c), stage₁.forward(c), …
  template <class Context>
    requires(Stage<Stages, Context> && ...)
  void forward(Context& c) {
    std::apply([&](auto&... s) { (s.forward(c), ...); }, stages_);
  }
  /// …, stage₁.backward(c), stage₀.backward(c)
  template <class Context>
    requires(Stage<Stages, Context> && ...)
  void backward(Context& c) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (std::get<sizeof...(Stages) - 1 - I>(stages_).backward(c), ...);
    }(std::index_sequence_for<Stages...>{});
  }

  template <std::size_t I>
  auto& stage() { return std::get<I>(stages_); }

 private:
  std::tuple<Stages...> stages_;
};

}  // namespace causalqwen::autodiff
