// The abduction network (model/abduction.hpp): U = (z·W_locᵀ + b_loc, floor + softplus(z·W_scaleᵀ +
// b_scale)). Forward: scale_U is floor + raw::softplus of the cached pre-activation bit for bit, in
// float and double, with and without a floor; loc_U and the pre-activation against a plain loop.
// Backward: every parameter's gradient and ∂L/∂z against central differences in double
// (autodiff::grad_check), the float gradients against the double model's central differences.
// Extreme pre-activations (±1e30, ±88, ±1e-30, ±0, subnormals): finite scales and gradients, the
// backward's d_pre = d_scale·σ(pre) bit for bit. Random parameters' seeds are printed.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/cauchy/special.hpp>
#include <causalqwen/model/abduction.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace cq = causalqwen;

namespace {

template <class T>
bool same_bits(T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return std::bit_cast<U>(a) == std::bit_cast<U>(b);
}

/// Parameters [C,H] and [C], input z [M,H], and the loss weights a, b [M,C] of
/// L = Σ a⊙loc_U + Σ b⊙scale_U (so ∂L/∂loc_U = a, ∂L/∂scale_U = b).
template <class T>
struct Fixture {
  using A = cq::model::Abduction<T>;
  std::size_t M, H, C;
  T floor;
  std::vector<T> loc_w, scale_w, loc_b, scale_b, z, a, b;

  Fixture(std::size_t m, std::size_t h, std::size_t c, T scale_floor)
      : M(m), H(h), C(c), floor(scale_floor), loc_w(c * h), scale_w(c * h), loc_b(c), scale_b(c), z(m * h),
        a(m * c), b(m * c) {}

  void randomise(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 0.7);
    for (auto* v : {&loc_w, &scale_w, &loc_b, &scale_b, &z, &a, &b})
      for (auto& x : *v) x = T(normal(rng));
  }
  /// The same values in another type (the float model's parameters read in double).
  template <class U>
  Fixture<U> as() const {
    Fixture<U> f(M, H, C, U(floor));
    const auto copy = [](const std::vector<T>& from, std::vector<U>& to) {
      for (std::size_t i = 0; i < from.size(); ++i) to[i] = U(from[i]);
    };
    copy(loc_w, f.loc_w), copy(scale_w, f.scale_w), copy(loc_b, f.loc_b), copy(scale_b, f.scale_b);
    copy(z, f.z), copy(a, f.a), copy(b, f.b);
    return f;
  }

  typename A::Params params() const {
    return {{loc_w.data(), {C, H}}, {scale_w.data(), {C, H}}, {loc_b.data(), {C}}, {scale_b.data(), {C}}};
  }
  cq::model::Individuals<const T> forward(typename A::Cache& cache) const {
    return A::forward(params(), cq::TensorView<const T, 2>(z.data(), {M, H}), cache, floor);
  }
  double loss() const {
    typename A::Cache cache;
    const auto U = forward(cache);
    double l = 0;
    for (std::size_t i = 0; i < M * C; ++i) l += double(a[i]) * double(U.loc.data[i]) + double(b[i]) * double(U.scale.data[i]);
    return l;
  }

  /// The gradients of L: the parameters' (in the order loc_w, scale_w, loc_b, scale_b) and dz;
  /// d_pre, the backward's in-place ∂L/∂pre.
  struct Gradients {
    std::vector<T> loc_w, scale_w, loc_b, scale_b, dz, d_pre;
  };
  Gradients backward(typename A::Cache& cache) const {
    forward(cache);
    Gradients g{std::vector<T>(C * H, T(0)), std::vector<T>(C * H, T(0)), std::vector<T>(C, T(0)),
                std::vector<T>(C, T(0)), std::vector<T>(M * H, T(0)), b};
    std::vector<T> d_loc = a;
    const typename A::Grads grads{{g.loc_w.data(), {C, H}}, {g.scale_w.data(), {C, H}}, {g.loc_b.data(), {C}},
                                  {g.scale_b.data(), {C}}};
    A::backward(params(), grads, cq::TensorView<const T, 2>(z.data(), {M, H}), cache,
                cq::CauchyViewGrad<T, 2>({d_loc.data(), {M, C}}, {g.d_pre.data(), {M, C}}),
                cq::TensorView<T, 2>(g.dz.data(), {M, H}));
    return g;
  }
};

/// Forward against the formula: pre and loc_U from a plain loop (close), scale_U =
/// floor + raw::softplus(pre) bit for bit.
template <class T>
void check_forward(T floor) {
  CAPTURE(floor);
  Fixture<T> f(7, 5, 6, floor);
  f.randomise(cqtest::test_seed(71, "abduction forward"));
  typename Fixture<T>::A::Cache cache;
  const auto U = f.forward(cache);
  REQUIRE(U.loc.shape == cq::Shape<2>{7, 6});
  std::size_t bad_bits = 0, bad_values = 0;
  for (std::size_t m = 0; m < f.M; ++m)
    for (std::size_t c = 0; c < f.C; ++c) {
      double loc = double(f.loc_b[c]), pre = double(f.scale_b[c]);
      for (std::size_t h = 0; h < f.H; ++h) {
        loc += double(f.z[m * f.H + h]) * double(f.loc_w[c * f.H + h]);
        pre += double(f.z[m * f.H + h]) * double(f.scale_w[c * f.H + h]);
      }
      const std::size_t i = m * f.C + c;
      bad_values += !cqtest::close_rel(double(U.loc.data[i]), loc, 1e-5) +
                    !cqtest::close_rel(double(cache.pre_scale[i]), pre, 1e-5);
      const T want = floor != T(0) ? cq::raw::softplus(cache.pre_scale[i]) + floor : cq::raw::softplus(cache.pre_scale[i]);
      bad_bits += !same_bits(U.scale.data[i], want);
      CHECK(U.scale.data[i] > floor);
    }
  CHECK(bad_values == 0);
  CHECK(bad_bits == 0);
}

/// Each gradient of the double model against central differences of its loss.
void check_gradients_double(double floor) {
  CAPTURE(floor);
  Fixture<double> f(6, 4, 5, floor);
  f.randomise(cqtest::test_seed(72, "abduction gradients, double"));
  typename Fixture<double>::A::Cache cache;
  const auto g = f.backward(cache);
  const std::pair<std::vector<double>*, const std::vector<double>*> pairs[] = {
      {&f.loc_w, &g.loc_w}, {&f.scale_w, &g.scale_w}, {&f.loc_b, &g.loc_b}, {&f.scale_b, &g.scale_b}, {&f.z, &g.dz}};
  for (const auto& [x, analytic] : pairs) {
    const auto r = cq::autodiff::grad_check(std::span<double>(*x), std::span<const double>(*analytic), [&] { return f.loss(); });
    INFO(r.message());
    CHECK(r.ok);
  }
}

}  // namespace

TEST_CASE("abduction forward: scale_U = floor + softplus(pre) bit for bit, float and double") {
  for (const double floor : {0.0, 0.25}) {
    check_forward<float>(float(floor));
    check_forward<double>(floor);
  }
}

TEST_CASE("abduction backward in double: every gradient against central differences") {
  check_gradients_double(0.0);
  check_gradients_double(0.1);
}

TEST_CASE("abduction backward in float: the gradients against the double model's central differences") {
  Fixture<float> f(6, 4, 5, 0.1f);
  f.randomise(cqtest::test_seed(73, "abduction gradients, float"));
  typename Fixture<float>::A::Cache cache;
  const auto g = f.backward(cache);
  Fixture<double> d = f.as<double>();
  const std::pair<std::vector<double>*, const std::vector<float>*> pairs[] = {
      {&d.loc_w, &g.loc_w}, {&d.scale_w, &g.scale_w}, {&d.loc_b, &g.loc_b}, {&d.scale_b, &g.scale_b}, {&d.z, &g.dz}};
  cq::autodiff::GradCheckOptions options;
  options.rtol = 1e-4;  // float gradients against double differences
  for (const auto& [x, analytic_float] : pairs) {
    const std::vector<double> analytic(analytic_float->begin(), analytic_float->end());
    const auto r = cq::autodiff::grad_check(std::span<double>(*x), std::span<const double>(analytic), [&] { return d.loss(); }, options);
    INFO(r.message());
    CHECK(r.ok);
  }
}

template <class T>
void check_extremes() {
  const std::vector<T> pre = {T(1e30), T(-1e30), T(88), T(-88), T(1e-30), T(-1e-30), T(0), -T(0),
                              std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(),
                              std::numeric_limits<T>::min(), T(104), T(-104), T(20), T(-20), T(0.5)};
  Fixture<T> f(3, 2, pre.size(), T(0));
  f.randomise(cqtest::test_seed(74, "abduction at extreme pre-activations"));
  std::fill(f.scale_w.begin(), f.scale_w.end(), T(0));  // pre = z·0 + b_scale = b_scale
  f.scale_b = pre;
  typename Fixture<T>::A::Cache cache;
  const auto g = f.backward(cache);
  std::size_t bad = 0;
  for (std::size_t m = 0; m < f.M; ++m)
    for (std::size_t c = 0; c < f.C; ++c) {
      const std::size_t i = m * f.C + c;
      const T p = cache.pre_scale[i], s = cache.scale_U[i];
      CAPTURE(p);
      CHECK(p == pre[c]);
      CHECK(std::isfinite(s));
      CHECK(s >= T(0));
      bad += !same_bits(s, cq::raw::softplus(p)) + !same_bits(g.d_pre[i], f.b[i] * cq::raw::sigmoid(p));
      CHECK(std::isfinite(g.d_pre[i]));
    }
  CHECK(bad == 0);
  CHECK(cache.scale_U[0] == T(1e30));      // softplus(x) = x for large x
  CHECK(cache.scale_U[1] == T(0));         // e^{−1e30} underflows: softplus 0, σ 0
  CHECK(cqtest::close_rel(double(cache.scale_U[6]), std::log(2.0), 1e-6));  // softplus(0) = log 2
  std::size_t non_finite = 0;
  for (const auto* v : {&g.loc_w, &g.scale_w, &g.loc_b, &g.scale_b, &g.dz})
    for (const T x : *v) non_finite += !std::isfinite(x);
  CHECK(non_finite == 0);
}

TEST_CASE("abduction at extreme pre-activations: finite scales and gradients, the formulas' bits") {
  check_extremes<float>();
  check_extremes<double>();
}
