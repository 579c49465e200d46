// RegressionLoss (model/losses.hpp): its gradient, ∂(λ·L_reg_eff)/∂A and the parameters it
// reaches (w_reg, b_reg, the <NUM> row of W_cls, b_cls and the thresholds), against central
// differences of the loss in double, for float and double models, at α = 0, 0.5 and 1, with
// P_<NUM> in the middle and at both extremes (S_<NUM> far below and far above its threshold),
// for every regression head; and forward's rows equal loss_and_gradient's, bit for bit.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/model/losses.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace cq = causalqwen;
namespace cqm = causalqwen::model;

namespace {

constexpr std::size_t M = 7, C = 5, K = 4;  // positions, causal size, classes
constexpr std::int64_t k_num = 2;           // <NUM>

/// The action's parameters and an independent A [M,C], held in double (the central differences
/// perturb these) with every value representable in T, so that the T model and the double
/// loss see the same numbers.
template <class T>
struct RegressionCase {
  cqm::CausalConfig cfg;
  std::shared_ptr<cq::Layout> layout = std::make_shared<cq::Layout>();
  cq::Arena<double> params;
  std::vector<double> loc_A, scale_A, targets;  // [M,C], [M,C], [M]
  std::vector<std::uint8_t> num = {1, 0, 1, 1, 0, 1, 0};

  /// α, the shift of C_<NUM> from S_<NUM>'s typical location (0: P_<NUM> near ½; ±1e3: P
  /// near 0 or 1) and the regression head.
  RegressionCase(std::uint64_t seed, double alpha, double threshold_shift, cqm::RegHead head) {
    cfg.causal_size = C;
    cfg.num_classes = K;
    cfg.num_token_id = k_num;
    cfg.alpha_gate = alpha;
    cfg.reg_loss_weight = 0.7;
    cfg.reg_head = head;
    cfg.scale_Y_floor = 0.05;
    cqm::Action<double>::add_params(*layout, C, K);
    params.reset(layout);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 0.6);
    for (auto& v : params.span()) v = representable(normal(rng));
    params.slot_span(cqm::names::threshold)[k_num] = representable(0.1 + threshold_shift);
    loc_A.resize(M * C);
    scale_A.resize(M * C);
    targets.resize(M);
    for (auto& v : loc_A) v = representable(normal(rng) / 0.6);
    for (auto& v : scale_A) v = representable(std::fabs(normal(rng)) + 0.3);
    for (auto& v : targets) v = representable(2.0 * normal(rng));
  }
  static double representable(double v) { return static_cast<double>(static_cast<T>(v)); }

  /// λ·L_reg_eff = λ·Σ_m gate_m·nll_m / max(N_num, 1), in double, from the current values.
  double loss() const {
    typename cqm::RegressionLoss<double>::Rows rows;
    const cq::Arena<double>& cp = params;
    const auto A = cq::assume_cauchy_view<cq::Kind::independent>(cq::TensorView<const double, 2>(loc_A.data(), {M, C}),
                                                                 cq::TensorView<const double, 2>(scale_A.data(), {M, C}));
    cqm::RegressionLoss<double>::forward(cqm::Action<double>::Params::bind(cp), A, num, {targets.data(), {M}}, cfg, rows);
    double sum = 0;
    std::size_t n_num = 0;
    for (std::size_t m = 0; m < M; ++m) {
      sum += rows.L_reg_gated[m];
      n_num += num[m];
    }
    return cfg.reg_loss_weight * sum / static_cast<double>(std::max<std::size_t>(n_num, 1));
  }

  /// The T model's gradient: every parameter slot in the layout's order, then ∂/∂loc_A, ∂/∂scale_A.
  struct Gradient {
    cq::Arena<T> params;
    std::vector<T> d_loc_A, d_scale_A;
  };
  Gradient gradient(typename cqm::RegressionLoss<T>::Rows& rows) const {
    cq::Arena<T> p(layout);
    const auto from = params.span();
    const auto to = p.span();
    for (std::size_t i = 0; i < from.size(); ++i) to[i] = static_cast<T>(from[i]);
    const std::vector<T> la(loc_A.begin(), loc_A.end()), sa(scale_A.begin(), scale_A.end()), y(targets.begin(), targets.end());
    Gradient g{cq::Arena<T>(layout), std::vector<T>(M * C, T(0)), std::vector<T>(M * C, T(0))};
    const cq::Arena<T>& cp = p;
    const auto A = cq::assume_cauchy_view<cq::Kind::independent>(cq::TensorView<const T, 2>(la.data(), {M, C}),
                                                                 cq::TensorView<const T, 2>(sa.data(), {M, C}));
    cqm::RegressionLoss<T>::loss_and_gradient(cqm::Action<T>::Params::bind(cp), A, num, {y.data(), {M}}, cfg, rows,
                                              cqm::Action<T>::Grads::bind(g.params),
                                              {{g.d_loc_A.data(), {M, C}}, {g.d_scale_A.data(), {M, C}}});
    // forward's rows are loss_and_gradient's, bit for bit
    typename cqm::RegressionLoss<T>::Rows evaluated;
    cqm::RegressionLoss<T>::forward(cqm::Action<T>::Params::bind(cp), A, num, {y.data(), {M}}, cfg, evaluated);
    const auto same = [](const std::vector<T>& a, const std::vector<T>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
    };
    CHECK(same(evaluated.loc_Y, rows.loc_Y));
    CHECK(same(evaluated.scale_Y, rows.scale_Y));
    CHECK(same(evaluated.nll, rows.nll));
    CHECK(same(evaluated.P_num, rows.P_num));
    CHECK(same(evaluated.gate, rows.gate));
    CHECK(same(evaluated.L_reg_gated, rows.L_reg_gated));
    return g;
  }
};

/// Every coordinate of `analytic` against central differences of loss() over `x`.
void check_coordinates(std::span<double> x, const std::vector<double>& analytic, const std::function<double()>& loss,
                       double rtol, const std::string& what) {
  cq::autodiff::GradCheckOptions opt;
  opt.rtol = rtol;
  const auto r = cq::autodiff::grad_check(x, std::span<const double>(analytic), loss, opt);
  INFO(what, ": ", r.message());
  CHECK(r.ok);
}

template <class T>
void check_regression_gradient(double rtol) {
  const auto seed = cqtest::test_seed(65, std::is_same_v<T, float> ? "regression loss gradient (float)"
                                                                    : "regression loss gradient (double)");
  for (const auto head : cqm::reg_heads)
    for (const double alpha : {0.0, 0.5, 1.0})
      for (const double shift : {0.0, 1e3, -1e3}) {
        CAPTURE(cqm::reg_head_name(head));
        CAPTURE(alpha);
        CAPTURE(shift);
        RegressionCase<T> c(seed, alpha, shift, head);
        typename cqm::RegressionLoss<T>::Rows rows;
        auto g = c.gradient(rows);
        // the case is what it claims: P_<NUM> near ½, near 0 (C far above S) or near 1
        double p_min = 1, p_max = 0;
        for (std::size_t m = 0; m < M; ++m) {
          p_min = std::min(p_min, double(rows.P_num[m]));
          p_max = std::max(p_max, double(rows.P_num[m]));
        }
        if (shift > 0) CHECK(p_max < 2e-3);
        if (shift < 0) CHECK(p_min > 1 - 2e-3);
        if (shift == 0) CHECK((p_min > 0.02 && p_max < 0.98));
        const auto loss = [&] { return c.loss(); };
        for (const auto& slot : c.layout->slots()) {
          const auto a = g.params.slot_span(slot.name);
          check_coordinates(c.params.slot_span(slot.name), std::vector<double>(a.begin(), a.end()), loss, rtol, slot.name);
        }
        check_coordinates(c.loc_A, std::vector<double>(g.d_loc_A.begin(), g.d_loc_A.end()), loss, rtol, "loc_A");
        check_coordinates(c.scale_A, std::vector<double>(g.d_scale_A.begin(), g.d_scale_A.end()), loss, rtol, "scale_A");
      }
}

}  // namespace

TEST_CASE("RegressionLoss<double>: the gradient matches central differences at α = 0, 0.5, 1 and extreme P_<NUM>") {
  check_regression_gradient<double>(1e-6);
}

TEST_CASE("RegressionLoss<float>: the gradient matches central differences at α = 0, 0.5, 1 and extreme P_<NUM>") {
  check_regression_gradient<float>(1e-4);
}
