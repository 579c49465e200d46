// The operations over views (cauchy/operations.hpp), in float and double: each against its
// formula computed in long double (and, for linear, a hand loop), the kinds the rules give,
// in-place use, the owning tensor's operations giving the same bits, extreme inputs (scales
// 1e-30 and 1e30, locations ±1e30) and the refusals with their messages.
#include "../support/test_support.hpp"

#include <causalqwen/cauchy.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cq = causalqwen;
using cq::Kind;

namespace {

/// Owned loc and scale [rows, cols] with the typed view of kind K over them (the escape).
template <class T>
struct Buffers {
  std::size_t rows, cols;
  std::vector<T> loc, scale;
  Buffers(std::size_t r, std::size_t c, std::vector<T> l, std::vector<T> s) : rows(r), cols(c), loc(std::move(l)), scale(std::move(s)) {}
  Buffers(std::size_t r, std::size_t c) : rows(r), cols(c), loc(r * c, T(-7)), scale(r * c, T(-7)) {}
  template <Kind K>
  cq::CauchyView<const T, 2, K> view() const {
    return cq::assume_cauchy_view<K>(cq::TensorView<const T, 2>(loc.data(), {rows, cols}),
                                     cq::TensorView<const T, 2>(scale.data(), {rows, cols}));
  }
  cq::CauchyOut<T, 2> out() { return {{loc.data(), {rows, cols}}, {scale.data(), {rows, cols}}}; }
};

/// Relative closeness to a long double reference, within `ulps` units in the last place of T.
template <class T>
bool close(T got, long double want, double ulps) {
  if (want == 0) return got == 0;
  return std::fabs(static_cast<long double>(got) - want) <= ulps * std::numeric_limits<T>::epsilon() * std::fabs(want);
}

/// loc and scale of [2,3] with ordinary and extreme entries.
template <class T>
Buffers<T> extreme_input() {
  return {2, 3, {T(1), T(-2), T(1e30), T(-1e30), T(0.5), T(0)}, {T(1e-30), T(1e30), T(2), T(0.25), T(1e-30), T(1e30)}};
}

}  // namespace

TEST_CASE_TEMPLATE("linear over views: loc·Wᵀ + b, scale·|W|ᵀ, marginal, extreme inputs", T, float, double) {
  auto in = extreme_input<T>();
  const auto U = in.template view<Kind::independent>();
  const std::vector<T> w{T(1), T(-0.5), T(2), T(0), T(3), T(-1e-10)}, b{T(0.1), T(-0.2)};
  const cq::TensorView<const T, 2> W(w.data(), {2, 3});
  Buffers<T> y(2, 2);
  const auto Y = cq::linear(W, cq::TensorView<const T, 1>(b.data(), {2}), U, y.out());
  static_assert(decltype(Y)::kind == Kind::marginal);
  CHECK(Y.loc.data == y.loc.data());
  CHECK(Y.scale.data == y.scale.data());
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t m = 0; m < 2; ++m) {
      long double l = b[m], s = 0;
      for (std::size_t n = 0; n < 3; ++n) {
        l += static_cast<long double>(w[m * 3 + n]) * in.loc[r * 3 + n];
        s += std::fabs(static_cast<long double>(w[m * 3 + n])) * in.scale[r * 3 + n];
      }
      CAPTURE(r);
      CAPTURE(m);
      // the sums of terms of mixed signs near 1e30 lose the small terms, as the reference does
      CHECK(close(Y.loc(r, m), l, 8));
      CHECK(close(Y.scale(r, m), s, 8));
      CHECK(Y.scale(r, m) > T(0));
    }
  // without bias: the same products
  Buffers<T> y0(2, 2);
  const auto Y0 = cq::linear(W, {}, U, y0.out());
  CHECK(Y0.scale(1, 1) == Y.scale(1, 1));
  CHECK(Y0.loc(0, 0) + b[0] == Y.loc(0, 0));
  // the owning tensor's linear is this one: the same bits
  const cq::CauchyTensor<T, 2> Ut(U);
  xt::xtensor<T, 2> Wt = xt::empty<T>({2, 3});
  xt::xtensor<T, 1> bt = xt::empty<T>({2});
  std::copy(w.begin(), w.end(), Wt.begin());
  std::copy(b.begin(), b.end(), bt.begin());
  const auto Yt = cq::linear(Wt, bt, Ut);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(Yt.loc().data()[i] == y.loc[i]);
    CHECK(Yt.scale().data()[i] == y.scale[i]);
  }
}

TEST_CASE_TEMPLATE("linear over views: the refusals", T, float, double) {
  auto in = extreme_input<T>();
  const auto U = in.template view<Kind::independent>();
  const std::vector<T> w(4, T(1));
  Buffers<T> y(2, 2);
  auto message = [](auto f) { return cqtest::error_message<cq::DomainError>(f); };
  CHECK(message([&] { (void)cq::linear(cq::TensorView<const T, 2>(w.data(), {2, 2}), {}, U, y.out()); }) ==
        "causalqwen::linear: W has 2 columns but the tensor's last dimension is 3");
  CHECK(message([&] {
          (void)cq::linear(cq::TensorView<const T, 2>(w.data(), {1, 3}), cq::TensorView<const T, 1>(w.data(), {2}), U, y.out());
        }) == "causalqwen::linear: b must have 1 entries (W's rows) or none, got 2");
  CHECK(message([&] { (void)cq::linear(cq::TensorView<const T, 2>(w.data(), {1, 3}), {}, U, y.out()); }) ==
        "causalqwen::linear: loc of the output must have shape [2,1], got [2,2]");
}

TEST_CASE_TEMPLATE("per-component operations over views: formulas, kinds kept, extreme inputs", T, float, double) {
  const auto in = extreme_input<T>();
  const auto M = in.template view<Kind::marginal>();
  const std::vector<T> a{T(-2), T(1e-5), T(3)}, c{T(1), T(0), T(-1e30)}, noise{T(-1.5), T(0), T(1e30)};
  const cq::TensorView<const T, 1> av(a.data(), {3}), cv(c.data(), {3}), bv(noise.data(), {3});
  const auto each = [&](auto&& view, auto loc_of, auto scale_of, double ulps) {
    static_assert(std::remove_cvref_t<decltype(view)>::kind == Kind::marginal);
    for (std::size_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      CHECK(close(view.loc.data[i], loc_of(i), ulps));
      CHECK(close(view.scale.data[i], scale_of(i), ulps));
    }
  };
  const auto L = [&](std::size_t i) { return static_cast<long double>(in.loc[i]); };
  const auto S = [&](std::size_t i) { return static_cast<long double>(in.scale[i]); };
  Buffers<T> o(2, 3);
  each(cq::affine(M, av, cv, o.out()), [&](std::size_t i) { return L(i) * a[i % 3] + c[i % 3]; },
       [&](std::size_t i) { return S(i) * std::fabs(static_cast<long double>(a[i % 3])); }, 2);
  each(cq::times(T(-4), M, o.out()), [&](std::size_t i) { return L(i) * -4; }, [&](std::size_t i) { return S(i) * 4; }, 0);
  each(cq::divide(M, T(-4), o.out()), [&](std::size_t i) { return L(i) / -4; }, [&](std::size_t i) { return S(i) / 4; }, 0);
  each(cq::shift(M, T(3), o.out()), [&](std::size_t i) { return L(i) + 3; }, S, 0.5);
  each(cq::negate(M, o.out()), [&](std::size_t i) { return -L(i); }, S, 0);
  each(cq::add_noise(M, bv, o.out()), L, [&](std::size_t i) { return S(i) + std::fabs(static_cast<long double>(noise[i % 3])); },
       0.5);
  for (std::size_t i = 0; i < 6; ++i) CHECK(o.scale[i] > T(0));  // 1e-30 + 0 and 1e30 + 1e30 stay finite and positive
}

TEST_CASE_TEMPLATE("sums of views declared independent: loc + loc, scale + scale, the kind by the rules", T, float, double) {
  const auto x = extreme_input<T>();
  const Buffers<T> y(2, 3, {T(1e30), T(2), T(-1e30), T(1), T(-0.5), T(1e-30)}, {T(1e30), T(1e-30), T(1), T(1e-30), T(1e30), T(1)});
  Buffers<T> o(2, 3);
  const auto II = cq::sum_independent(x.template view<Kind::independent>(), cq::assume_independent(y.template view<Kind::independent>()), o.out());
  static_assert(decltype(II)::kind == Kind::independent);
  const auto IM = cq::sum_independent(x.template view<Kind::independent>(), cq::assume_independent(y.template view<Kind::marginal>()), o.out());
  static_assert(decltype(IM)::kind == Kind::marginal);
  const auto MI = cq::sum_independent(x.template view<Kind::marginal>(), cq::assume_independent(y.template view<Kind::independent>()), o.out());
  static_assert(decltype(MI)::kind == Kind::marginal);
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(close(o.loc[i], static_cast<long double>(x.loc[i]) + y.loc[i], 0.5));
    CHECK(close(o.scale[i], static_cast<long double>(x.scale[i]) + y.scale[i], 0.5));
  }
  CHECK(o.loc[0] == T(1e30));   // 1 + 1e30: the small term is below the big one's ulp
  CHECK(o.loc[2] == T(0));      // 1e30 − 1e30 exactly
  Buffers<T> short_y(1, 3);
  CHECK(cqtest::error_message<cq::DomainError>([&] {
          (void)cq::sum_independent(x.template view<Kind::independent>(), cq::assume_independent(short_y.template view<Kind::independent>()),
                                    o.out());
        }) == "causalqwen::sum_independent: the two Cauchy tensors must have the same shape, got [2,3] and [1,3]");
}

TEST_CASE_TEMPLATE("operations over views in place, and their refusals", T, float, double) {
  Buffers<T> x(1, 2, {T(1), T(-2)}, {T(0.5), T(2)});
  const auto X = x.template view<Kind::independent>();
  // in place: out over X's own buffers
  const auto Y = cq::times(T(2), X, x.out());
  static_assert(decltype(Y)::kind == Kind::independent);
  CHECK(x.loc == std::vector<T>{T(2), T(-4)});
  CHECK(x.scale == std::vector<T>{T(1), T(4)});
  const std::vector<T> b{T(-1), T(1)};
  (void)cq::add_noise(X, cq::TensorView<const T, 1>(b.data(), {2}), x.out());
  CHECK(x.scale == std::vector<T>{T(2), T(5)});
  (void)cq::sum_independent(X, cq::assume_independent(X), x.out());  // X + an independent copy of X
  CHECK(x.loc == std::vector<T>{T(4), T(-8)});
  CHECK(x.scale == std::vector<T>{T(4), T(10)});

  auto message = [](auto f) { return cqtest::error_message<cq::DomainError>(f); };
  Buffers<T> o(1, 2), wrong(2, 1);
  const std::vector<T> zero{T(0), T(1)}, one{T(1), T(1)}, three(3, T(1));
  const cq::TensorView<const T, 1> zv(zero.data(), {2}), ov(one.data(), {2}), tv(three.data(), {3});
  CHECK(message([&] { (void)cq::times(T(0), X, o.out()); }) ==
        "causalqwen::times: a Cauchy tensor times 0 is a constant, not a Cauchy tensor");
  CHECK(message([&] { (void)cq::divide(X, T(0), o.out()); }) == "causalqwen::divide: division of a Cauchy tensor by 0");
  CHECK(message([&] { (void)cq::affine(X, zv, ov, o.out()); }) == "causalqwen::affine: a must be non-zero, a[0] = 0");
  CHECK(message([&] { (void)cq::affine(X, tv, ov, o.out()); }) == "causalqwen::affine: a and c must have 2 entries (the last dimension)");
  CHECK(message([&] { (void)cq::add_noise(X, tv, o.out()); }) ==
        "causalqwen::add_noise: b must have 2 entries (the last dimension), got 3");
  CHECK(message([&] { (void)cq::negate(X, wrong.out()); }) == "causalqwen::negate: loc of the output must have shape [1,2], got [2,1]");
}

TEST_CASE_TEMPLATE("a tensor and its view: copies of typed views, the same kind, the same operations", T, float, double) {
  const Buffers<T> x(2, 2, {T(1), T(-2), T(3), T(1e30)}, {T(0.5), T(2), T(1e-30), T(1e30)});
  const auto X = x.template view<Kind::marginal>();
  const cq::CauchyTensor Xt(X);  // the owning copy, of the view's kind
  static_assert(std::is_same_v<std::remove_const_t<decltype(Xt)>, cq::CauchyTensor<T, 2, Kind::marginal>>);
  const auto V = Xt.view();
  static_assert(std::is_same_v<decltype(V), const cq::CauchyView<const T, 2, Kind::marginal>>);
  CHECK(V.loc.data == Xt.loc().data());
  CHECK(V.scale.data == Xt.scale().data());
  CHECK(V.loc.data != x.loc.data());
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(Xt.loc().data()[i] == x.loc[i]);
    CHECK(Xt.scale().data()[i] == x.scale[i]);
  }
  // each tensor operation gives the bits of the operation over views
  const xt::xtensor<T, 1> a{T(-3), T(0.25)}, c{T(1), T(-1)};
  Buffers<T> o(2, 2);
  const auto A = cq::affine(Xt, a, c);
  (void)cq::affine(X, cq::TensorView<const T, 1>(a), cq::TensorView<const T, 1>(c), o.out());
  const auto N = cq::add_noise(-(T(2) * Xt) / T(3) + T(1), c);
  Buffers<T> p(2, 2);
  (void)cq::times(T(2), X, p.out());
  (void)cq::negate(p.template view<Kind::marginal>(), p.out());
  (void)cq::divide(p.template view<Kind::marginal>(), T(3), p.out());
  (void)cq::shift(p.template view<Kind::marginal>(), T(1), p.out());
  (void)cq::add_noise(p.template view<Kind::marginal>(), cq::TensorView<const T, 1>(c), p.out());
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(A.loc().data()[i] == o.loc[i]);
    CHECK(A.scale().data()[i] == o.scale[i]);
    CHECK(N.loc().data()[i] == p.loc[i]);
    CHECK(N.scale().data()[i] == p.scale[i]);
  }
}
