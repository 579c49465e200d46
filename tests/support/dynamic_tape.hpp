// Test support, not part of the library: a dynamic tape of backward closures, with which the
// tests compose layers and fused elementwise maps at run time and check their gradients.
/// The dynamic tape: for experiments composed at run time. Tensors created on the tape carry
/// a value and a gradient; every operation records a backward closure; `backward(y)` seeds
/// dy = 1 and runs the closures in reverse. Fused elementwise chains use the expression
/// templates (`tape.map`), layers use `tape.custom` with their own forward/backward.
///   Tape<double> tape;
///   auto x = tape.variable({4}, {1, 2, 3, 4});
///   auto y = tape.map([](auto a) { return silu(a) * a; }, x);
///   auto s = tape.sum(y);
///   tape.backward(s);            // tape.grad(x) now holds d s / d x
#pragma once
#include <causalqwen/autodiff/expression.hpp>
#include <causalqwen/core/error.hpp>
#include <causalqwen/core/tensor.hpp>

#include <cstddef>
#include <algorithm>
#include <deque>
#include <functional>
#include <initializer_list>
#include <vector>

namespace cqtest {

/// A handle to a tensor on a tape.
struct TapeVar {
  std::size_t id;
};

template <class T>
class Tape {
 public:
  /// A new leaf of `shape`, zero or filled from `values` (row-major).
  TapeVar variable(std::vector<std::size_t> shape, std::vector<T> values = {}) {
    std::size_t n = 1;
    for (auto e : shape) n *= e;
    causalqwen::detail::require(values.empty() || values.size() == n, "Tape::variable",
                    "{} values for {} elements", values.size(), n);
    Node node{std::move(shape), values.empty() ? std::vector<T>(n, T(0)) : std::move(values),
              std::vector<T>(n, T(0))};
    nodes_.push_back(std::move(node));
    return TapeVar{nodes_.size() - 1};
  }

  std::vector<T>& value(TapeVar v) { return node(v).value; }
  std::vector<T>& grad(TapeVar v) { return node(v).grad; }
  const std::vector<std::size_t>& shape(TapeVar v) { return node(v).shape; }

  /// y = f(leaves…) elementwise, fused; `f` receives one expression leaf per input, e.g.
  /// `tape.map([](auto g, auto u) { return silu(g) * u; }, gate, up)`.
  template <class F, class... V>
  TapeVar map(F f, V... inputs) {
    const std::size_t n = node(first(inputs...)).value.size();
    ((causalqwen::detail::require(node(inputs).value.size() == n, "Tape::map",
                      "inputs have {} and {} elements", n, node(inputs).value.size())),
     ...);
    TapeVar out = variable(node(first(inputs...)).shape);
    auto expr = f(leaf(inputs)...);
    auto& y = node(out).value;
    for (std::size_t i = 0; i < n; ++i) y[i] = expr.at(i);
    backward_.push_back([this, f, out, inputs...] {
      auto e = f(leaf(inputs)...);
      const auto& dy = node(out).grad;
      for (std::size_t i = 0; i < dy.size(); ++i) e.backprop_at(i, dy[i]);
    });
    return out;
  }

  /// s = Σ x (a scalar of shape [1]).
  TapeVar sum(TapeVar x) {
    TapeVar out = variable({1});
    T s = 0;
    for (T v : node(x).value) s += v;
    node(out).value[0] = s;
    backward_.push_back([this, x, out] {
      const T g = node(out).grad[0];
      for (T& d : node(x).grad) d += g;
    });
    return out;
  }

  /// An operation with its own kernels: `forward(out_value, input values…)` fills the
  /// output; `backward(out_grad, out_value)` accumulates into the inputs' gradients (reach
  /// them with `grad(var)`).
  template <class Forward, class Backward>
  TapeVar custom(std::vector<std::size_t> out_shape, Forward&& forward, Backward backward) {
    TapeVar out = variable(std::move(out_shape));
    forward(node(out).value);
    backward_.push_back([this, out, backward]() mutable {
      backward(node(out).grad, node(out).value);
    });
    return out;
  }

  /// Seeds d out = 1 (every element) and runs the recorded closures in reverse.
  void backward(TapeVar out) {
    for (T& g : node(out).grad) g = T(1);
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) (*it)();
  }
  /// Zeroes every gradient (values and recorded operations stay).
  void zero_grad() {
    for (auto& n : nodes_) std::fill(n.grad.begin(), n.grad.end(), T(0));
  }
  /// Forgets the recorded operations (for the next step); tensors stay.
  void clear() { backward_.clear(); }

  /// A point to come back to: `rewind(mark())` drops every tensor and operation recorded after
  /// it (e.g. keep the parameters, drop one step's intermediates).
  struct Mark {
    std::size_t nodes, operations;
  };
  Mark mark() const { return {nodes_.size(), backward_.size()}; }
  void rewind(Mark m) {
    causalqwen::detail::require(m.nodes <= nodes_.size() && m.operations <= backward_.size(), "Tape::rewind",
                    "the mark is newer than the tape");
    nodes_.resize(m.nodes);
    backward_.resize(m.operations);
  }
  std::size_t size() const { return nodes_.size(); }
  std::size_t recorded() const { return backward_.size(); }

 private:
  struct Node {
    std::vector<std::size_t> shape;
    std::vector<T> value, grad;
  };
  Node& node(TapeVar v) {
    causalqwen::detail::require(v.id < nodes_.size(), "Tape", "no tensor {} on this tape", v.id);
    return nodes_[v.id];
  }
  causalqwen::autodiff::Leaf<T> leaf(TapeVar v) {
    auto& n = node(v);
    return causalqwen::autodiff::Leaf<T>{{}, n.value.data(), n.grad.data(), n.value.size()};
  }
  template <class V0, class... V>
  static TapeVar first(V0 v0, V...) { return v0; }

  std::deque<Node> nodes_;  // deque: references stay valid as nodes are added
  std::vector<std::function<void()>> backward_;
};

}  // namespace cqtest
