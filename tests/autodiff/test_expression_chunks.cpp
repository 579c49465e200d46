// The chunked passes of the expression templates (eval, eval_add, backprop) against plain scalar
// loops of each function's documented formula: equal bits, in float (the exponentials from the
// vector exp) and double, at extreme inputs (±88, ±104, ±1e-30, ±0, ±inf, NaN, ±FLT_MAX, the exp
// branch thresholds) and at random ones (seed printed), over lengths that end inside a chunk and
// sizes split over the threads. Softplus (a log1p of an exponential) also against the hand-written
// float loops the abduction ran before its scale went through the expressions.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/expression.hpp>
#include <causalqwen/cauchy/special.hpp>
#include <causalqwen/simd/exp_float.hpp>
#include <causalqwen/simd/log1p_float.hpp>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace cq = causalqwen;
namespace ad = causalqwen::autodiff;

namespace {

template <class T>
cq::TensorView<T, 1> v1(std::vector<T>& v) {
  return {v.data(), {v.size()}};
}

template <class T>
bool same_bits(T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return std::bit_cast<U>(a) == std::bit_cast<U>(b) || (std::isnan(a) && std::isnan(b));
}

/// Elements of got and want whose bits differ; the first one is printed with its input.
template <class T>
std::size_t differing(const char* what, const std::vector<T>& x, const std::vector<T>& got, const std::vector<T>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same_bits(got[i], want[i]) && bad++ == 0)
      std::printf("%s at x[%zu] = %a: %a, the scalar loop gives %a\n", what, i, double(x[i]), double(got[i]),
                  double(want[i]));
  return bad;
}

/// Inputs: every extreme value crossed with a few partners, then `random` values from `seed`
/// (uniform over [−100, 100] and raw bit patterns), an odd total so the last chunk is partial.
template <class T>
struct Inputs {
  std::vector<T> g, u, da;
  Inputs(std::uint64_t seed, std::size_t random) {
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    const T extremes[] = {T(0), -T(0), inf, -inf, nan, T(88), T(-88), T(104), T(-104), T(1e-30), T(-1e-30),
                          std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(),
                          std::numeric_limits<T>::denorm_min(), T(0x1.62e42ep6f), T(-0x1.9fe368p6f),
                          T(-0x1.9d1d9ep6f), T(-87.33654f)};
    for (const T s : extremes)
      for (const T p : {T(1.5), -T(0), T(3e-39f), T(-2.25), inf}) {
        g.push_back(s);
        u.push_back(p);
        da.push_back(-p / T(3));
      }
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> wide(-100.0, 100.0), unit(-4.0, 4.0);
    for (std::size_t i = 0; i < random; ++i) {
      T x = T(wide(rng));
      if (i % 4 == 3) {  // a raw bit pattern: any exponent, sign and NaN payload
        if constexpr (sizeof(T) == 4)
          x = std::bit_cast<T>(static_cast<std::uint32_t>(rng()));
        else
          x = std::bit_cast<T>(static_cast<std::uint64_t>(rng()));
      }
      g.push_back(x);
      u.push_back(T(unit(rng)));
      da.push_back(T(unit(rng)));
    }
  }
};

/// SwiGLU's middle a = silu(g)·u and its backward through the chunked passes, against the
/// formula's scalar loop: a = g/(1 + e^{−g})·u; dg += (da·u)·(σ(1 + g(1 − σ))), du += da·silu(g).
template <class T>
void check_swiglu_middle(std::size_t random) {
  const std::uint64_t seed = cqtest::test_seed(65, "chunked SwiGLU middle");
  Inputs<T> in(seed, random);
  const std::size_t n = in.g.size();
  std::vector<T> a(n), a_ref(n), a_scalar_api(n), dg(n), du(n);
  for (std::size_t i = 0; i < n; ++i) dg[i] = du[i] = T(int(i % 13) - 6) * T(0.125);
  std::vector<T> dg_ref = dg, du_ref = du;

  ad::eval(v1(a), ad::silu(ad::constant(v1(in.g))) * ad::constant(v1(in.u)));
  ad::backprop(ad::silu(ad::var(v1(in.g), v1(dg))) * ad::var(v1(in.u), v1(du)), v1(in.da));
  const auto e = ad::silu(ad::constant(v1(in.g))) * ad::constant(v1(in.u));
  for (std::size_t i = 0; i < n; ++i) {
    const T x = in.g[i];
    a_ref[i] = x / (T(1) + std::exp(-x)) * in.u[i];
    a_scalar_api[i] = e.at(i);
    const T s = T(1) / (T(1) + std::exp(-x));
    dg_ref[i] += (in.da[i] * in.u[i]) * (s * (T(1) + x * (T(1) - s)));
    du_ref[i] += in.da[i] * (x / (T(1) + std::exp(-x)));
  }
  CHECK(differing("silu(g)·u", in.g, a, a_ref) == 0);
  CHECK(differing("silu(g)·u, e.at(i)", in.g, a_scalar_api, a_ref) == 0);
  CHECK(differing("dg", in.g, dg, dg_ref) == 0);
  CHECK(differing("du", in.g, du, du_ref) == 0);
}

/// f(x) and f'(x)·r through eval, eval_add and backprop, against the scalar loops `value(x)` and
/// `r·derivative(x)` (a table entry built on one exponential).
template <class F, class T, class Value, class Derivative>
void check_exp_entry(const char* name, Value value, Derivative derivative) {
  CAPTURE(name);
  Inputs<T> in(cqtest::test_seed(66, name), 100003);
  const std::size_t n = in.g.size();
  std::vector<T> y(n), y_ref(n), acc(in.u), acc_ref(in.u), dx(in.da), dx_ref(in.da);
  ad::eval(v1(y), ad::apply<F>(ad::constant(v1(in.g))));
  ad::eval_add(v1(acc), ad::apply<F>(ad::constant(v1(in.g))) * ad::constant(v1(in.da)));
  ad::backprop(ad::apply<F>(ad::var(v1(in.g), v1(dx))), v1(in.u));
  for (std::size_t i = 0; i < n; ++i) {
    y_ref[i] = value(in.g[i]);
    acc_ref[i] += value(in.g[i]) * in.da[i];
    dx_ref[i] += in.u[i] * derivative(in.g[i]);
  }
  CHECK(differing("eval", in.g, y, y_ref) == 0);
  CHECK(differing("eval_add", in.g, acc, acc_ref) == 0);
  CHECK(differing("backprop", in.g, dx, dx_ref) == 0);
}

/// The abduction's float loops before its scale went through the expressions: y = softplus(x) from
/// e^{−|x|} (exp_float) and its log1p (log1p_unit_float), and d ← d·σ(x) from e^{−|x|}.
void softplus_loop(const float* x, float* y, std::size_t n) {
  cq::for_each_exp_chunk(x, n, [](float v) { return -std::fabs(v); }, [&](std::size_t i0, std::size_t m, float* w) {
    cq::log1p_unit_float(w, w, m);
    for (std::size_t i = 0; i < m; ++i) y[i0 + i] = std::fmax(x[i0 + i], 0.0f) + w[i];
  });
}
void times_sigmoid_loop(const float* x, float* d, std::size_t n) {
  cq::for_each_exp_chunk(x, n, [](float v) { return -std::fabs(v); }, [&](std::size_t i0, std::size_t m, const float* w) {
    for (std::size_t i = 0; i < m; ++i) {
      const float e = w[i];
      d[i0 + i] = d[i0 + i] * (x[i0 + i] >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e));
    }
  });
}

}  // namespace

TEST_CASE("chunked SwiGLU middle in float: the formula's bits, forward and backward") {
  std::printf("exp_float runs on %s\n", cq::exp_float_path());
  check_swiglu_middle<float>(300001);
}

TEST_CASE("chunked SwiGLU middle in double: the formula's bits, forward and backward") {
  check_swiglu_middle<double>(100001);
}

TEST_CASE("chunked exp and sigmoid: the scalar formulas' bits in float and double") {
  const auto exp_f = [](float x) { return std::exp(x); };
  const auto exp_d = [](double x) { return std::exp(x); };
  check_exp_entry<ad::Exp, float>("exp float", exp_f, exp_f);
  check_exp_entry<ad::Exp, double>("exp double", exp_d, exp_d);
  const auto sig_f = [](float x) { return cq::raw::sigmoid(x); };
  const auto dsig_f = [](float x) {
    const float y = cq::raw::sigmoid(x);
    return y * (1.0f - y);
  };
  const auto sig_d = [](double x) { return cq::raw::sigmoid(x); };
  const auto dsig_d = [](double x) {
    const double y = cq::raw::sigmoid(x);
    return y * (1.0 - y);
  };
  check_exp_entry<ad::Sigmoid, float>("sigmoid float", sig_f, dsig_f);
  check_exp_entry<ad::Sigmoid, double>("sigmoid double", sig_d, dsig_d);
}

TEST_CASE("chunked passes: every length around a chunk boundary") {
  for (const std::size_t n : {std::size_t{1}, ad::chunk_size - 1, ad::chunk_size, ad::chunk_size + 1,
                              3 * ad::chunk_size + 17}) {
    CAPTURE(n);
    std::vector<float> g(n), u(n), a(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = -9.0f + 0.37f * float(i % 50), u[i] = 0.5f + 0.01f * float(i % 7);
    ad::eval(v1(a), ad::silu(ad::constant(v1(g))) * ad::constant(v1(u)));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += !same_bits(a[i], g[i] / (1.0f + std::exp(-g[i])) * u[i]);
    CHECK(bad == 0);
  }
}

// The per-element loops run under omp simd: a leaf reached twice accumulates both terms into
// its gradient in order, and an output that is an operand's own storage is read before written.
TEST_CASE("chunked passes: a gradient reached twice per element, and an output in place") {
  const std::size_t n = 5 * ad::chunk_size + 3;
  std::vector<float> x(n), dx(n, 0.25f), dout(n), y(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = -7.0f + 0.11f * float(i % 131), dout[i] = 0.5f + 0.03f * float(i % 17);
  ad::backprop(ad::silu(ad::var(v1(x), v1(dx))) * ad::var(v1(x), v1(dx)), v1(dout));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float e = std::exp(-x[i]), s = 1.0f / (1.0f + e);
    float want = 0.25f;
    want += (dout[i] * x[i]) * (s * (1.0f + x[i] * (1.0f - s)));  // through silu
    want += dout[i] * (x[i] / (1.0f + e));                        // through the second factor
    bad += !same_bits(dx[i], want);
  }
  CHECK(bad == 0);
  y = x;
  ad::eval(v1(y), ad::silu(ad::constant(v1(y))) * ad::constant(v1(y)));
  bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += !same_bits(y[i], x[i] / (1.0f + std::exp(-x[i])) * x[i]);
  CHECK(bad == 0);
}

TEST_CASE("chunked softplus: the scalar formulas' bits in float and double") {
  std::printf("log1p_unit_float runs %s\n", cq::log1p_unit_float_is_vectorised() ? "16 at a time" : "the scalar loop");
  check_exp_entry<ad::Softplus, float>("softplus float", [](float x) { return cq::raw::softplus(x); },
                                       [](float x) { return cq::raw::sigmoid(x); });
  check_exp_entry<ad::Softplus, double>("softplus double", [](double x) { return cq::raw::softplus(x); },
                                        [](double x) { return cq::raw::sigmoid(x); });
}

// ±1e30, ±88, ±1e-30, ±0, subnormals, the exp and log1p branch edges, then random values and raw
// bit patterns (Inputs), over a length that ends inside a chunk and is split over the threads.
TEST_CASE("chunked softplus in float: the bits of the abduction's former hand-written loops") {
  Inputs<float> in(cqtest::test_seed(67, "softplus against the former loops"), 400001);
  for (const float v : {1e30f, -1e30f, 88.0f, -88.0f, 1e-30f, -1e-30f, 0.0f, -0.0f, 1e-40f, -1e-40f, 1.17e-38f,
                        -1.17e-38f, 0x1p-29f, -0x1p-29f, 0.41422f, -0.41422f, 0.3465736f, -0.3465736f, 16.0f, -16.0f,
                        89.0f, -89.0f, 103.9f, -103.9f, 1e10f, -1e10f})
    for (int i = 0; i < 8; ++i) {  // v and the 7 floats below it in magnitude
      const float x = i == 0 ? v : std::nextafter(in.g.back(), 0.0f);
      in.g.push_back(x);
      in.u.push_back(0.75f - 0.125f * float(i));
      in.da.push_back(-1.5f + 0.5f * float(i));
    }
  const std::size_t n = in.g.size();
  std::vector<float> y(n), y_loop(n), d(in.u), d_loop(in.u);
  ad::eval(v1(y), ad::softplus(ad::constant(v1(in.g))));
  softplus_loop(in.g.data(), y_loop.data(), n);
  // the abduction's backward: d ← d·σ(x) in place (an eval; a backprop would add d·σ(x) to a gradient)
  ad::eval(v1(d), ad::constant(v1(d)) * ad::sigmoid(ad::constant(v1(in.g))));
  times_sigmoid_loop(in.g.data(), d_loop.data(), n);
  CHECK(differing("softplus", in.g, y, y_loop) == 0);
  CHECK(differing("d·sigmoid", in.g, d, d_loop) == 0);
  std::vector<float> y_raw(n);
  for (std::size_t i = 0; i < n; ++i) y_raw[i] = cq::raw::softplus(in.g[i]);
  CHECK(differing("softplus against raw::softplus", in.g, y, y_raw) == 0);
}

// The abduction's elementwise scale step (model/abduction.hpp: eval of softplus, and d·σ in place)
// on the special values and a dense run over [−40, 40]: raw::softplus and d·raw::sigmoid bit for bit.
TEST_CASE("chunked softplus and d·sigmoid in float give raw::softplus and d·raw::sigmoid bit for bit") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f, 88.0f, -88.0f,
                          104.0f, -104.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  for (std::uint32_t i = 0; i < 400000; ++i) x.push_back(-40.0f + 80.0f * float(i) / 400000.0f);
  std::vector<float> y(x.size()), d(x.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = float(int(i % 1001) - 500) / 250.0f;
  std::vector<float> dy = d;
  ad::eval(v1(y), ad::softplus(ad::constant(v1(x))));
  ad::eval(v1(dy), ad::constant(v1(dy)) * ad::sigmoid(ad::constant(v1(x))));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same_bits(y[i], cq::raw::softplus(x[i])) || !same_bits(dy[i], d[i] * cq::raw::sigmoid(x[i]))) {
      if (bad++ == 0)
        std::printf("at x = %a: softplus %a, d·σ %a; the scalar forms give %a, %a\n", double(x[i]), double(y[i]), double(dy[i]),
                    double(cq::raw::softplus(x[i])), double(d[i] * cq::raw::sigmoid(x[i])));
    }
  CHECK(bad == 0);
}
