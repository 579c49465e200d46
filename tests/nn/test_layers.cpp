// grad_check of each layer on tiny shapes (B=2, S=5, H=8) in double.
#include "grad_harness.hpp"

#include <causalqwen/model/numeric_embedding.hpp>
#include <causalqwen/nn.hpp>

#include <algorithm>
#include <cstdint>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;
using cq::TensorView;
using cqtest::Checked;
using cqtest::randn;

namespace {
constexpr std::size_t B = 2, S = 5, H = 8, M = B * S;
template <std::size_t N>
TensorView<double, N> view(std::vector<double>& v, cq::Shape<N> shape) { return {v.data(), shape}; }
void zero(std::vector<double>& v) { std::fill(v.begin(), v.end(), 0.0); }
}  // namespace

TEST_CASE("Linear (with and without bias): gradients of W, b and x") {
  const std::uint64_t seed = 1;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t out_dim = 6;
  auto x = randn(M * H, rng), w = randn(out_dim * H, rng), b = randn(out_dim, rng), r = randn(M * out_dim, rng);
  std::vector<double> y(M * out_dim), dx(M * H), dw(w.size()), db(b.size());
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    nn::Linear<double>::Params p{view(w, cq::Shape<2>{out_dim, H}),
                                  with_bias ? view(b, cq::Shape<1>{out_dim}) : TensorView<double, 1>{}};
    nn::Linear<double>::Params g{view(dw, cq::Shape<2>{out_dim, H}),
                                  with_bias ? view(db, cq::Shape<1>{out_dim}) : TensorView<double, 1>{}};
    nn::Linear<double>::Cache c;
    auto loss = [&] {
      nn::Linear<double>::forward(p, view(x, cq::Shape<2>{M, H}), view(y, cq::Shape<2>{M, out_dim}), c);
      return cqtest::dot(r, y);
    };
    loss();
    zero(dx), zero(dw), zero(db);
    nn::Linear<double>::backward(p, g, c, view(r, cq::Shape<2>{M, out_dim}), view(dx, cq::Shape<2>{M, H}));
    std::vector<Checked> checked{{"x", x, dx}, {"W", w, dw}};
    if (with_bias) checked.push_back({"b", b, db});
    cqtest::check_gradients(checked, loss);
  }
}

TEST_CASE("Embedding scatters into the used rows; NumericEmbedding differentiates through ê = d/‖d‖") {
  const std::uint64_t seed = 2;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t V = 7;
  std::vector<std::int64_t> ids = {3, 1, 3, 0, 6, 3, 2, 2, 5, 1};  // repeats accumulate
  std::vector<double> values = {0, 2.5, 0, -0.3, 0, 11.0, 0, 0, -4.0, 0.7};
  auto table = randn(V * H, rng), dir = randn(H, rng), r = randn(M * H, rng);
  std::vector<double> e(M * H), dtable(table.size()), ddir(H), dvalues(M);
  cq::model::NumericEmbedding<double>::Params p{view(table, cq::Shape<2>{V, H}), view(dir, cq::Shape<1>{H})};
  cq::model::NumericEmbedding<double>::Params g{view(dtable, cq::Shape<2>{V, H}), view(ddir, cq::Shape<1>{H})};
  cq::model::NumericEmbedding<double>::Cache c;
  const TensorView<const std::int64_t, 1> idv(ids.data(), {M});
  auto loss = [&] {
    cq::model::NumericEmbedding<double>::forward(p, idv, view(values, cq::Shape<1>{M}), view(e, cq::Shape<2>{M, H}), c);
    return cqtest::dot(r, e);
  };
  loss();
  // v = 0 rows are exactly the token embedding
  for (std::size_t j = 0; j < H; ++j) CHECK(e[0 * H + j] == table[3 * H + j]);
  cq::model::NumericEmbedding<double>::backward(g, c, view(r, cq::Shape<2>{M, H}), view(dvalues, cq::Shape<1>{M}));
  // unused rows (4) get no gradient
  for (std::size_t j = 0; j < H; ++j) CHECK(dtable[4 * H + j] == 0.0);
  cqtest::check_gradients({{"table", table, dtable}, {"direction", dir, ddir}, {"numeric values", values, dvalues}}, loss);
  // scaling d does not change the output (only its direction matters)
  loss();
  auto before = e;
  for (auto& v : dir) v *= 3.0;
  loss();
  for (std::size_t i = 0; i < e.size(); ++i) CHECK(e[i] == doctest::Approx(before[i]).epsilon(1e-14));
  // bad ids and a zero direction are refused
  ids[4] = 7;
  CHECK_THROWS_WITH_AS(loss(), "causalqwen::Embedding::forward: token id 7 at position 4 is outside [0, 7)",
                       cq::DomainError);
  ids[4] = 6;
  std::fill(dir.begin(), dir.end(), 0.0);
  CHECK_THROWS_AS(loss(), cq::DomainError);
}

TEST_CASE("RMSNorm: y = w ⊙ x / sqrt(mean(x²)+eps); gradients of x and w") {
  const std::uint64_t seed = 3;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  auto x = randn(M * H, rng), w = randn(H, rng), r = randn(M * H, rng);
  std::vector<double> y(M * H), dx(M * H), dw(H), inv(M);
  nn::RMSNorm<double>::Cache c;
  c.inv_rms = view(inv, cq::Shape<1>{M});
  auto loss = [&] {
    nn::RMSNorm<double>::forward({view(w, cq::Shape<1>{H})}, 1e-6, view(x, cq::Shape<2>{M, H}),
                                 view(y, cq::Shape<2>{M, H}), c);
    return cqtest::dot(r, y);
  };
  loss();
  double ms = 0;
  for (std::size_t j = 0; j < H; ++j) ms += x[j] * x[j] / H;
  CHECK(y[3] == doctest::Approx(w[3] * x[3] / std::sqrt(ms + 1e-6)).epsilon(1e-14));
  nn::RMSNorm<double>::backward({view(w, cq::Shape<1>{H})}, {view(dw, cq::Shape<1>{H})}, c,
                                view(r, cq::Shape<2>{M, H}), view(dx, cq::Shape<2>{M, H}));
  cqtest::check_gradients({{"x", x, dx}, {"w", w, dw}}, loss);
}

TEST_CASE("SwiGLU: down(silu(gate(x)) ⊙ up(x)); gradients of x and the three weights") {
  const std::uint64_t seed = 4;
  MESSAGE("seed ", seed);
  std::mt19937_64 rng(seed);
  const std::size_t F = 12;
  auto x = randn(M * H, rng), wg = randn(F * H, rng, 0.5), wu = randn(F * H, rng, 0.5), wd = randn(H * F, rng, 0.5);
  auto r = randn(M * H, rng);
  std::vector<double> y(M * H), dx(M * H), dwg(wg.size()), dwu(wu.size()), dwd(wd.size());
  std::vector<double> gbuf(M * F), ubuf(M * F), abuf(M * F), dg(M * F), du(M * F), da(M * F);
  nn::SwiGLU<double>::Params p{{view(wg, cq::Shape<2>{F, H})}, {view(wu, cq::Shape<2>{F, H})}, {view(wd, cq::Shape<2>{H, F})}};
  nn::SwiGLU<double>::Params g{{view(dwg, cq::Shape<2>{F, H})}, {view(dwu, cq::Shape<2>{F, H})}, {view(dwd, cq::Shape<2>{H, F})}};
  nn::SwiGLU<double>::Cache c;
  c.g = view(gbuf, cq::Shape<2>{M, F}), c.u = view(ubuf, cq::Shape<2>{M, F}), c.a = view(abuf, cq::Shape<2>{M, F});
  nn::SwiGLU<double>::Workspace ws{view(dg, cq::Shape<2>{M, F}), view(du, cq::Shape<2>{M, F}), view(da, cq::Shape<2>{M, F})};
  auto loss = [&] {
    nn::SwiGLU<double>::forward(p, view(x, cq::Shape<2>{M, H}), view(y, cq::Shape<2>{M, H}), c);
    return cqtest::dot(r, y);
  };
  loss();
  nn::SwiGLU<double>::backward(p, g, c, view(r, cq::Shape<2>{M, H}), view(dx, cq::Shape<2>{M, H}), ws);
  cqtest::check_gradients({{"x", x, dx}, {"gate", wg, dwg}, {"up", wu, dwu}, {"down", wd, dwd}}, loss);
}
