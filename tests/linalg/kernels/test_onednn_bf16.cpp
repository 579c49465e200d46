// The bf16 and int8 products of many rows on oneDNN (linalg/kernels/onednn_bf16.hpp), forced
// with set_bf16_kernel(Bf16Kernel::onednn) so that they run on every machine where oneDNN makes
// bf16 matmuls (its AMX kernels where the CPU has AMX, its AVX-512 ones elsewhere; where it makes
// none, AVX2 alone, each case says so and only the refusal of the choice is checked):
//   - prefill with a bf16 copy: within float rounding of the double sum of the bf16 values,
//     and within bf16 tolerance of the float product;
//   - prefill with an int8 copy (X quantised per row to s8): within the bound that quantising X
//     gives, |Δy_mn| ≤ (s_m/2)·Σ_k |w_nk| (+ float rounding), and its error against f32 stated;
//   - the products of mixed-precision training against our own bf16 kernels (the same formula,
//     another order of the float sums), the bf16 copy in rows giving the same values;
//   - fewer than onednn_min_rows rows stay on our kernels (their bits), and the name says what runs.
#include "../../support/float_matrices.hpp"
#include "../../support/test_support.hpp"

#include <causalqwen/linalg/bf16_copies.hpp>
#include <causalqwen/linalg/gemm.hpp>
#include <causalqwen/linalg/kernels/onednn_bf16.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;
using cqtest::c2, cqtest::normal_vector, cqtest::v2;

namespace {
double bf16_value(float v) { return cq::bf16_to_float(cq::float_to_bf16(v)); }

/// Sets a bf16 kernel choice for the scope, then automatic again.
struct KernelScope {
  explicit KernelScope(la::Bf16Kernel k) { la::set_bf16_kernel(k); }
  ~KernelScope() { la::set_bf16_kernel(la::Bf16Kernel::automatic); }
};

constexpr double float_eps = 1.0 / (1 << 23);
}  // namespace

TEST_CASE("oneDNN bf16 prefill: Y = bf16(X)·Wᵀ + b within float rounding of the bf16 values' sums, and of the float product within bf16") {
  if (!la::onednn_runs_bf16()) {
    MESSAGE(std::string(la::onednn_built_in() ? "oneDNN makes no bf16 matmul on this CPU (it needs AVX-512 or AMX): nothing runs on it"
                                   : "built without oneDNN: nothing runs on it"));
    return;
  }
  const KernelScope scope(la::Bf16Kernel::onednn);
  const unsigned seed = 20261202;
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed << ", oneDNN kernel: " << la::bf16_kernel_name());
  CHECK(la::bf16_kernel_name().find("(oneDNN)") != std::string::npos);
  for (const auto [M, K, N] : {std::array<std::size_t, 3>{40, 37, 29}, {64, 128, 96}, {17, 896, 40}}) {
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.1), b = normal_vector(N, rng);
    const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
    std::vector<float> y(M * N), y_f32(M * N);
    REQUIRE(la::packed_rows_on_onednn(M, p.ref()));
    la::linear_forward<float>(v2(y, M, N), c2(x, M, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref()), TensorView<const float, 1>(b.data(), {N}));
    la::set_bf16_kernel(la::Bf16Kernel::own);
    la::linear_forward<float>(v2(y_f32, M, N), c2(x, M, K), c2(w, N, K), TensorView<const float, 1>(b.data(), {N}));
    la::set_bf16_kernel(la::Bf16Kernel::onednn);
    double worst = 0, worst_f32 = 0;
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n) {
        double ref = b[n], mass = std::fabs(b[n]), mass_f32 = 0;
        for (std::size_t k = 0; k < K; ++k) {
          ref += bf16_value(x[m * K + k]) * bf16_value(w[n * K + k]);
          mass += std::fabs(bf16_value(x[m * K + k]) * bf16_value(w[n * K + k]));
          mass_f32 += std::fabs(double(x[m * K + k]) * w[n * K + k]);
        }
        const double e = std::fabs(y[m * N + n] - ref), e_f32 = std::fabs(double(y[m * N + n]) - y_f32[m * N + n]);
        CHECK(e <= double(K + 2) * float_eps * mass);
        CHECK(e_f32 <= (2.0 / 256 + double(K + 2) * float_eps) * mass_f32);  // X and W each rounded to 8 bits
        worst = std::max(worst, e / mass);
        worst_f32 = std::max(worst_f32, e_f32 / mass_f32);
      }
    MESSAGE("worst |y - bf16 sum| / Σ|x·w| = " << worst << ", against f32: " << worst_f32);
  }
}

TEST_CASE("oneDNN int8 prefill: X quantised per row, |y - y(X, q·s)| within (s_m/2)·Σ|w| of the f32 product") {
  if (!la::onednn_runs_bf16()) {
    MESSAGE(std::string(la::onednn_built_in() ? "oneDNN makes no bf16 matmul on this CPU (it needs AVX-512 or AMX): nothing runs on it"
                                   : "built without oneDNN: nothing runs on it"));
    return;
  }
  const KernelScope scope(la::Bf16Kernel::onednn);
  const unsigned seed = 20261203;
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed << ", oneDNN int8 prefill: " << la::onednn_int8_prefill_name());
  const std::size_t M = 48, K = 200, N = 72;
  const auto x = normal_vector(M * K, rng), b = normal_vector(N, rng);
  auto w = normal_vector(N * K, rng, 0.1);
  const la::PackedMatrix p(la::Format::int8, c2(w, N, K));
  la::round_weights(la::Format::int8, v2(w, N, K));  // w = q·s, what the copy holds
  for (const auto way : {la::OnednnInt8::s8, la::OnednnInt8::bf16}) {
    la::onednn_int8_prefill() = way;
    CAPTURE(int(way));
    std::vector<float> y(M * N);
    REQUIRE(la::packed_rows_on_onednn(M, p.ref()));
    la::linear_forward<float>(v2(y, M, N), c2(x, M, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref()), TensorView<const float, 1>(b.data(), {N}));
    double err2 = 0, ref2 = 0;
    for (std::size_t m = 0; m < M; ++m) {
      double amax = 0;
      for (std::size_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(double(x[m * K + k])));
      const double s_m = amax / 127;
      for (std::size_t n = 0; n < N; ++n) {
        double ref = b[n], wsum = 0, mass = std::fabs(b[n]);
        for (std::size_t k = 0; k < K; ++k) {
          ref += double(x[m * K + k]) * w[n * K + k];
          wsum += std::fabs(double(w[n * K + k]));
          mass += std::fabs(double(x[m * K + k]) * w[n * K + k]);
        }
        const double e = std::fabs(y[m * N + n] - ref);
        // s8: each x off by at most s_m/2; bf16: by at most 2⁻⁹|x| (≤ 2⁻⁹·amax)
        const double bound = way == la::OnednnInt8::s8 ? s_m / 2 * wsum : amax / 512 * wsum;
        CHECK(e <= bound * (1 + 1e-5) + double(K + 2) * 4 * float_eps * (mass + wsum * amax));
        err2 += e * e;
        ref2 += ref * ref;
      }
    }
    const double rel = std::sqrt(err2 / ref2);
    MESSAGE("relative RMS error against f32 with the int8 weights: " << rel);
    CHECK(rel < (way == la::OnednnInt8::s8 ? 0.02 : 0.005));  // measured: about 0.006 (s8) and 0.0015 (bf16) on normal X
  }
  la::onednn_int8_prefill() = la::OnednnInt8::s8;
}

TEST_CASE("oneDNN training products: X·Wᵀ, dY·W (+=), dYᵀ·X (+=) within float rounding of our bf16 kernels; the copy in rows reads the same") {
  if (!la::onednn_runs_bf16()) {
    MESSAGE(std::string(la::onednn_built_in() ? "oneDNN makes no bf16 matmul on this CPU (it needs AVX-512 or AMX): nothing runs on it"
                                   : "built without oneDNN: nothing runs on it"));
    return;
  }
  const unsigned seed = 20261204;
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed);
  const std::size_t M = 33, K = 70, N = 52;
  const auto x = normal_vector(M * K, rng), w = normal_vector(N * K, rng, 0.1), dy = normal_vector(M * N, rng);
  const auto dx0 = normal_vector(M * K, rng), dw0 = normal_vector(N * K, rng);
  auto layout = std::make_shared<cq::Layout>();
  layout->add("w", {N, K});
  cq::Arena<float> params(layout);
  std::copy(w.begin(), w.end(), params.data());
  la::Bf16Copies copies(la::detail_bf16::PackLayout::rows);
  const la::PackedRef copy = copies.add(params, params.view<2>("w"));
  copies.rows_updated(copies.follow(layout->slots()[0]), params.data(), 0, N);
  CHECK(copy.rows_layout);
  struct Results {
    std::vector<float> y, dx, dw;
  };
  const auto run = [&](la::Bf16Kernel kernel, const la::PackedRef& b_copy) {
    const KernelScope scope(kernel);
    Results r{std::vector<float>(M * N), dx0, dw0};
    la::bf16_matmul_rows(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, w.data(), K, r.y.data(), N, false, b_copy);
    la::bf16_matmul_rows(la::Op::plain, la::Op::plain, M, K, N, dy.data(), N, w.data(), K, r.dx.data(), K, true, b_copy);
    la::bf16_matmul_rows(la::Op::transposed, la::Op::plain, N, K, M, dy.data(), N, x.data(), K, r.dw.data(), K, true);
    return r;
  };
  const Results ours = run(la::Bf16Kernel::own, {}), dnnl = run(la::Bf16Kernel::onednn, {}),
                dnnl_copy = run(la::Bf16Kernel::onednn, copy), ours_copy = run(la::Bf16Kernel::own, copy);
  // the double sums of the bf16 values, and Σ|terms|: each float result within (terms + 2)·ε of it
  const auto check_close = [](const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& mass,
                              std::size_t terms) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::fabs(double(got[i]) - ref[i]) > double(terms + 2) * float_eps * mass[i]) ++bad;
    return bad;
  };
  std::vector<double> y_ref(M * N), y_mass(M * N), dx_ref(dx0.begin(), dx0.end()), dx_mass(M * K), dw_ref(dw0.begin(), dw0.end()),
      dw_mass(N * K);
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t k = 0; k < K; ++k) {
        const double xw = bf16_value(x[m * K + k]) * bf16_value(w[n * K + k]), dyw = bf16_value(dy[m * N + n]) * bf16_value(w[n * K + k]),
                     dyx = bf16_value(dy[m * N + n]) * bf16_value(x[m * K + k]);
        y_ref[m * N + n] += xw, y_mass[m * N + n] += std::fabs(xw);
        dx_ref[m * K + k] += dyw, dx_mass[m * K + k] += std::fabs(dyw);
        dw_ref[n * K + k] += dyx, dw_mass[n * K + k] += std::fabs(dyx);
      }
  for (std::size_t i = 0; i < M * K; ++i) dx_mass[i] += std::fabs(dx0[i]);
  for (std::size_t i = 0; i < N * K; ++i) dw_mass[i] += std::fabs(dw0[i]);
  for (const Results* r : {&ours, &dnnl}) {
    CHECK(check_close(r->y, y_ref, y_mass, K) == 0);
    CHECK(check_close(r->dx, dx_ref, dx_mass, N) == 0);
    CHECK(check_close(r->dw, dw_ref, dw_mass, M) == 0);
  }
  CHECK(dnnl_copy.y == dnnl.y);
  CHECK(dnnl_copy.dx == dnnl.dx);
  CHECK(ours_copy.y == ours.y);  // our kernels widen a copy in rows to floats: the same values
  CHECK(ours_copy.dx == ours.dx);
  // |W| from the copy alone (B null), as the Cauchy head's scale products read it
  std::vector<float> abs_w(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) abs_w[i] = std::fabs(w[i]);
  for (const auto kernel : {la::Bf16Kernel::own, la::Bf16Kernel::onednn}) {
    const KernelScope scope(kernel);
    std::vector<float> from_copy(M * N), from_floats(M * N);
    la::bf16_matmul_rows(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, nullptr, K, from_copy.data(), N, false,
                         copy.abs_values());
    la::bf16_matmul_rows(la::Op::plain, la::Op::transposed, M, N, K, x.data(), K, abs_w.data(), K, from_floats.data(), N, false);
    CHECK(from_copy == from_floats);
  }
  const double differ = [&] {
    double d = 0;
    for (std::size_t i = 0; i < ours.y.size(); ++i) d = std::max(d, std::fabs(double(dnnl.y[i]) - ours.y[i]));
    return d;
  }();
  MESSAGE("largest |oneDNN − ours| of X·Wᵀ: " << differ);
}

TEST_CASE("oneDNN: fewer than onednn_min_rows rows run on our kernels (their bits); a copy made from two threads at once is one copy") {
  if (!la::onednn_runs_bf16()) {
    MESSAGE(std::string(la::onednn_built_in() ? "oneDNN makes no bf16 matmul on this CPU (it needs AVX-512 or AMX): nothing runs on it"
                                   : "built without oneDNN: nothing runs on it"));
    return;
  }
  const unsigned seed = 20261205;
  std::mt19937_64 rng(seed);
  MESSAGE("seed " << seed);
  const std::size_t K = 96, N = 80, few = la::onednn_min_rows - 1, many = 64;
  const auto x = normal_vector(many * K, rng), w = normal_vector(N * K, rng, 0.1);
  const la::PackedMatrix p(la::Format::bf16, c2(w, N, K));
  std::vector<float> y_own(few * N), y_dnnl(few * N);
  {
    const KernelScope scope(la::Bf16Kernel::own);
    la::linear_forward<float>(v2(y_own, few, N), c2(x, few, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref()));
  }
  const KernelScope scope(la::Bf16Kernel::onednn);
  CHECK(!la::packed_rows_on_onednn(few, p.ref()));
  CHECK(!la::packed_rows_on_onednn(many, p.ref().rows_from(4, N - 4)));  // the copy is of the whole matrix
  la::linear_forward<float>(v2(y_dnnl, few, N), c2(x, few, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref()));
  CHECK(y_dnnl == y_own);
  std::vector<float> a(many * N), b(many * N);
  std::thread first([&] { la::linear_forward<float>(v2(a, many, N), c2(x, many, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref())); });
  std::thread second([&] { la::linear_forward<float>(v2(b, many, N), c2(x, many, K), la::Weight<const float>(c2(w, N, K)).with_decode(p.ref())); });
  first.join();
  second.join();
  CHECK(a == b);
}

TEST_CASE("oneDNN forced where it makes no bf16 matmul: set_bf16_kernel refuses with a sentence, and the choice stays") {
  if (!la::onednn_built_in()) {
    MESSAGE("built without oneDNN: the choice onednn runs our own kernels");
    CHECK_NOTHROW(la::set_bf16_kernel(la::Bf16Kernel::onednn));
    la::set_bf16_kernel(la::Bf16Kernel::automatic);
    return;
  }
  if (la::onednn_runs_bf16()) {
    MESSAGE("oneDNN makes bf16 matmuls on this CPU (" << la::bf16_kernel_name() << "): the choice is taken");
    CHECK_NOTHROW(la::set_bf16_kernel(la::Bf16Kernel::onednn));
    CHECK(la::bf16_products_on_onednn());
  } else {
    MESSAGE("oneDNN makes no bf16 matmul on this CPU: the choice is refused");
    CHECK_THROWS_WITH_AS(la::set_bf16_kernel(la::Bf16Kernel::onednn), doctest::Contains("oneDNN makes no bf16 matmul on this CPU"),
                         cq::DomainError);
    CHECK_FALSE(la::bf16_products_on_onednn());
  }
  la::set_bf16_kernel(la::Bf16Kernel::automatic);
}
