// The causal heads and the loss: every parameter's gradient (and ∂L/∂z) against central
// differences in double, in the deterministic and sampling modes, with the stable and the ε
// BCE; the chunked vocabulary walk against one chunk; hand-computed values on a tiny case.
#include "../support/test_support.hpp"

#include <causalqwen/autodiff/grad_check.hpp>
#include <causalqwen/model/causal_head.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace cq = causalqwen;
using cq::model::ActionMode;

namespace {

struct HeadFixture {
  cq::model::CausalConfig cfg;
  std::shared_ptr<cq::Layout> layout = std::make_shared<cq::Layout>();
  cq::Arena<double> params;
  std::vector<double> z;                 // [M,H]
  std::vector<std::int64_t> labels, mask;  // [M]
  std::vector<double> targets, uniform;  // [M], [M,C]
  std::size_t M = 6;

  explicit HeadFixture(std::uint64_t seed, cq::model::BceForm form = cq::model::BceForm::stable, double alpha = 0.0) {
    cfg.backbone = {9, 4, 8, 1, 2, 1, 1e-6, 1e6};
    cfg.causal_size = 4;
    cfg.num_classes = 7;  // < vocab 9: two padded rows
    cfg.num_token_id = 5;
    cfg.ovr_threshold = {0.5, -0.3, 0.1, 0.0, 0.2, 0.4, -0.1};
    cfg.alpha_gate = alpha;
    cfg.reg_loss_weight = 0.7;
    cfg.bce_form = form;
    cq::model::add_head_params(*layout, cfg);
    params.reset(layout);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 0.6);
    for (auto& v : params.span()) v = normal(rng);
    for (auto& v : params.slot_span(cq::model::names::abd_scale_b)) v = std::fabs(v) + 0.5;
    z.resize(M * 4);
    for (auto& v : z) v = normal(rng);
    labels = {3, 5, -100, 5, 0, 6};
    mask = {1, 1, 1, 1, 0, 1};
    targets = {0.0, 2.5, 0.0, -1.25, 0.0, 0.0};
    std::uniform_real_distribution<double> u01(0.05, 0.95);
    uniform.resize(M * 4);
    for (auto& v : uniform) v = u01(rng);
  }

  cq::model::HeadTargets<double> head_targets() const {
    return {{labels.data(), {M}}, {targets.data(), {M}}, {mask.data(), {M}}};
  }
  cq::model::SamplingNoise<double> noise(ActionMode mode) const {
    if (mode == ActionMode::deterministic) return {};
    return {0.8, {uniform.data(), {M, 4}}};
  }
  double loss(ActionMode mode, std::size_t chunk = 3) {
    cq::model::CausalHead<double> head(cfg, chunk);
    typename cq::model::CausalHead<double>::Cache cache;
    const cq::Arena<double>& cp = params;
    return head.forward(cq::model::HeadParams<const double>::bind(cp), {z.data(), {M, 4}}, head_targets(), mode,
                        noise(mode), cache)
        .L_total;
  }
};

void check_all_gradients(HeadFixture& f, ActionMode mode) {
  cq::model::CausalHead<double> head(f.cfg, 3);
  typename cq::model::CausalHead<double>::Cache cache;
  cq::Arena<double> grads(f.layout);
  std::vector<double> dz(f.M * 4, 0.0);
  auto g = cq::model::HeadParams<double>::bind(grads);
  const cq::Arena<double>& cp = f.params;
  const auto p = cq::model::HeadParams<const double>::bind(cp);
  head.loss_and_gradient(p, {f.z.data(), {f.M, 4}}, f.head_targets(), mode, f.noise(mode), cache, g);
  head.backward(p, g, {f.z.data(), {f.M, 4}}, cache, {dz.data(), {f.M, 4}});
  cq::autodiff::GradCheckOptions opt;
  opt.rtol = 2e-5;
  for (const auto& slot : f.layout->slots()) {
    auto x = f.params.slot_span(slot.name);
    auto a = grads.slot_span(slot.name);
    const auto r = cq::autodiff::grad_check(x, std::span<const double>(a.data(), a.size()),
                                            [&] { return f.loss(mode); }, opt);
    INFO(slot.name, ": ", r.message());
    CHECK(r.ok);
  }
  const auto r = cq::autodiff::grad_check(std::span<double>(f.z), std::span<const double>(dz), [&] { return f.loss(mode); }, opt);
  INFO("z: ", r.message());
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("CausalHead: every parameter gradient and dz match central differences (deterministic)") {
  HeadFixture f(cqtest::test_seed(31, "head grad deterministic"));
  check_all_gradients(f, ActionMode::deterministic);
}

TEST_CASE("CausalHead: gradients in the sampling mode (noise on the location, temperature 0.8)") {
  HeadFixture f(cqtest::test_seed(32, "head grad sampling"));
  check_all_gradients(f, ActionMode::sampling);
}

TEST_CASE("CausalHead: gradients with α = 0.3 and with the ε-form BCE") {
  HeadFixture f(cqtest::test_seed(33, "head grad alpha"), cq::model::BceForm::stable, 0.3);
  check_all_gradients(f, ActionMode::deterministic);
  HeadFixture e(cqtest::test_seed(34, "head grad eps"), cq::model::BceForm::epsilon);
  check_all_gradients(e, ActionMode::deterministic);
}

TEST_CASE("CausalHead: gradients with the Gaussian and the mse regression heads (α = 0 and 0.3)") {
  for (auto head : {cq::model::RegHead::gaussian, cq::model::RegHead::mse}) {
    for (double alpha : {0.0, 0.3}) {
      HeadFixture f(cqtest::test_seed(38, "head grad reg head"), cq::model::BceForm::stable, alpha);
      f.cfg.reg_head = head;
      INFO(cq::model::reg_head_name(head), ", alpha ", alpha);
      check_all_gradients(f, ActionMode::deterministic);
    }
  }
  // the per-number loss is the head's: at the <NUM> positions L_reg_gated = gate·loss(y, loc_Y, scale_Y)
  for (auto head : cq::model::reg_heads) {
    HeadFixture f(cqtest::test_seed(39, "head reg loss values"));
    f.cfg.reg_head = head;
    cq::model::CausalHead<double> h(f.cfg, 3);
    typename cq::model::CausalHead<double>::Cache c;
    const cq::Arena<double>& cp = f.params;
    h.forward(cq::model::HeadParams<const double>::bind(cp), {f.z.data(), {f.M, 4}}, f.head_targets(), ActionMode::deterministic, {}, c);
    for (std::size_t m : {std::size_t(1), std::size_t(3)}) {
      const auto expected = cq::model::regression_loss_grad(head, f.targets[m], c.regression.loc_Y[m], c.regression.scale_Y[m]);
      CHECK(c.regression.nll[m] == expected.value);
      CHECK(c.regression.L_reg_gated[m] == c.regression.gate[m] * expected.value);
    }
  }
}

TEST_CASE("CausalHead: the scale floors hold and leave every gradient exact") {
  HeadFixture f(cqtest::test_seed(37, "head scale floors"));
  f.cfg.scale_U_floor = 0.3;
  f.cfg.scale_Y_floor = 0.2;
  check_all_gradients(f, ActionMode::deterministic);
  check_all_gradients(f, ActionMode::sampling);
  // softplus(−40) ≈ 4e-18 and w_reg = 0: scale_U and scale_Y sit on their floors, never below
  namespace names = cq::model::names;
  for (auto& v : f.params.slot_span(names::abd_scale_b)) v = -40;
  for (auto& v : f.params.slot_span(names::abd_scale_w)) v = 0;
  for (auto& v : f.params.slot_span(names::reg_w)) v = 0;
  const auto run = [&](double floor_U, double floor_Y) {
    f.cfg.scale_U_floor = floor_U;
    f.cfg.scale_Y_floor = floor_Y;
    cq::model::CausalHead<double> head(f.cfg, 3);
    typename cq::model::CausalHead<double>::Cache cache;
    const cq::Arena<double>& cp = f.params;
    head.forward(cq::model::HeadParams<const double>::bind(cp), {f.z.data(), {f.M, 4}}, f.head_targets(),
                 ActionMode::deterministic, {}, cache);
    return cache;
  };
  const auto floored = run(0.3, 0.2), bare = run(0.0, 0.0);
  for (std::size_t i = 0; i < floored.abduction.scale_U.size(); ++i) {
    CHECK(floored.abduction.scale_U[i] == doctest::Approx(0.3).epsilon(1e-15));
    CHECK(bare.abduction.scale_U[i] < 1e-17);
  }
  for (std::size_t m = 0; m < f.M; ++m) {
    CHECK(floored.regression.scale_Y[m] == 0.2);
    CHECK(bare.regression.scale_Y[m] == 0.0);
    CHECK(std::isfinite(floored.regression.nll[m]));
  }
  // a negative or infinite floor is refused, naming the field
  f.cfg.scale_U_floor = -1;
  CHECK(cqtest::error_message<cq::DomainError>([&] { cq::model::CausalHead<double> head(f.cfg, 3); })
            .find("scale_U_floor must be finite and >= 0, got -1") != std::string::npos);
  f.cfg.scale_U_floor = 0;
  f.cfg.scale_Y_floor = std::numeric_limits<double>::infinity();
  CHECK(cqtest::error_message<cq::DomainError>([&] { cq::model::CausalHead<double> head(f.cfg, 3); })
            .find("scale_Y_floor must be finite and >= 0, got inf") != std::string::npos);
}

TEST_CASE("CausalHead: the chunk size does not change the result") {
  HeadFixture f(cqtest::test_seed(35, "head chunks"));
  const double one = f.loss(ActionMode::deterministic, 7), three = f.loss(ActionMode::deterministic, 3),
               single = f.loss(ActionMode::deterministic, 1);
  CHECK(three == doctest::Approx(one).epsilon(1e-13));
  CHECK(single == doctest::Approx(one).epsilon(1e-13));
}

TEST_CASE("CausalHead: pred and max_prob are the argmax and the maximum of the full P table") {
  HeadFixture f(cqtest::test_seed(36, "head max_prob"));
  for (std::size_t chunk : {std::size_t(1), std::size_t(3), std::size_t(7)}) {
    cq::model::CausalHead<double> head(f.cfg, chunk);
    typename cq::model::CausalHead<double>::Cache cache;
    const cq::Arena<double>& cp = f.params;
    const auto p = cq::model::HeadParams<const double>::bind(cp);
    head.forward(p, {f.z.data(), {f.M, 4}}, f.head_targets(), ActionMode::deterministic, {}, cache);
    const auto full = head.full_vocabulary(p, cache);
    const std::size_t K = f.cfg.num_classes;
    REQUIRE(cache.ovr.max_prob.size() == f.M);
    for (std::size_t m = 0; m < f.M; ++m) {
      std::size_t best = 0;
      for (std::size_t k = 1; k < K; ++k)
        if (full.P[m * K + k] > full.P[m * K + best]) best = k;
      INFO("chunk ", chunk, " position ", m);
      CHECK(cache.ovr.pred[m] == static_cast<std::int64_t>(best));
      CHECK(cqtest::close_rel(cache.ovr.max_prob[m], full.P[m * K + best], 1e-14, 0.0));
    }
  }
}

TEST_CASE("CausalHead: values by hand on one position") {
  // H = C = 2 with everything on the first component: W_loc = diag(2, 0), b_loc = (0.5, 0),
  // W_scale = 0, b_scale = softplus⁻¹(3), W_cls = [1 0; −2 0], b_cls = (0, 1), w_reg = (0.5, 0),
  // b_reg = 1, b_noise = −0.25, thresholds 1; K = 2, <NUM> = 1.
  cq::model::CausalConfig cfg;
  cfg.backbone = {2, 2, 1, 1, 1, 1, 1e-6, 1e6};
  cfg.causal_size = 2;
  cfg.num_classes = 2;
  cfg.num_token_id = 1;
  cfg.ovr_threshold = {1.0};
  auto layout = std::make_shared<cq::Layout>();
  cq::model::add_head_params(*layout, cfg);
  cq::Arena<double> params(layout);
  auto p = cq::model::HeadParams<double>::bind(params);
  p.abduction.loc_weight(0, 0) = 2; p.abduction.loc_bias[0] = 0.5;
  for (auto& b : p.abduction.scale_bias) b = cq::inv_softplus(3.0);
  p.action.cls_weight.values(0, 0) = 1; p.action.cls_weight.values(1, 0) = -2; p.action.cls_bias[0] = 0; p.action.cls_bias[1] = 1;
  p.action.reg_weight.values(0, 0) = 0.5; p.action.reg_bias[0] = 1;
  for (auto& b : p.action.b_noise) b = -0.25;
  p.action.threshold[0] = p.action.threshold[1] = 1;
  const double z[2] = {1.5, 0.0}, y = 4.0;
  const std::int64_t label = 1;
  cq::model::CausalHead<double> head(cfg);
  typename cq::model::CausalHead<double>::Cache cache;
  const cq::Arena<double>& cp = params;
  const auto m = head.forward(cq::model::HeadParams<const double>::bind(cp), {z, {1, 2}}, {{&label, {1}}, {&y, {1}}, {}},
                              ActionMode::deterministic, {}, cache);
  // loc_U = 3.5, scale_U = 3, scale_A = 3.25; loc_S = (3.5, −6), scale_S = (3.25, 6.5)
  const double P0 = 0.5 + std::atan((3.5 - 1) / 3.25) / M_PI, P1 = 0.5 + std::atan((-6.0 - 1) / 6.5) / M_PI;
  const double L_cls = -std::log(1 - P0) - std::log(P1);
  const double loc_Y = 0.5 * 3.5 + 1, scale_Y = 0.5 * 3.25;
  const double nll = std::log(M_PI * scale_Y) + std::log1p(std::pow((y - loc_Y) / scale_Y, 2));
  CHECK(cache.abduction.loc_U[0] == 3.5);
  CHECK(cache.abduction.scale_U[0] == doctest::Approx(3.0).epsilon(1e-15));
  CHECK(m.L_cls_mean == doctest::Approx(L_cls).epsilon(1e-14));
  CHECK(cache.regression.P_num[0] == doctest::Approx(P1).epsilon(1e-14));
  CHECK(m.L_reg_eff == doctest::Approx(P1 * nll).epsilon(1e-14));
  CHECK(m.L_total == doctest::Approx(L_cls + P1 * nll).epsilon(1e-14));
  CHECK(m.reg_mae == doctest::Approx(std::fabs(y - loc_Y)));
  CHECK(m.ovr_prob_sum == doctest::Approx(P0 + P1).epsilon(1e-14));
  CHECK(cache.ovr.pred[0] == 0);  // margin 0.77 beats −1.08
  CHECK(cache.ovr.max_prob[0] == doctest::Approx(P0).epsilon(1e-14));  // P of the argmax class
  CHECK(m.accuracy == 0.0);
  CHECK(m.num_accuracy == 0.0);
  CHECK(m.units_mean_scale == doctest::Approx(3.0));
  CHECK(m.units_mean_loc == doctest::Approx(1.75));
}

TEST_CASE("CausalHead rejects labels outside the classes and bad sampling input") {
  HeadFixture f(1);
  f.labels[0] = 7;  // K = 7: ids 7, 8 are padded vocabulary rows
  CHECK(cqtest::error_message<cq::DomainError>([&] { f.loss(ActionMode::deterministic); }) ==
        "causalqwen::CausalHead: label 7 at position 0 is neither -100 nor a class id in [0, 7)");
  f.labels[0] = 3;
  f.uniform[2] = 1.0;
  CHECK(cqtest::error_message<cq::DomainError>([&] { f.loss(ActionMode::sampling); }) ==
        "causalqwen::CausalHead: sampling uniforms must lie in (0, 1), got 1");
}

TEST_CASE("CausalHead: loss_and_gradient's values are forward's, bit for bit; backward needs it first") {
  for (auto mode : {ActionMode::deterministic, ActionMode::sampling}) {
    HeadFixture f(cqtest::test_seed(40, "head forward is the training forward"), cq::model::BceForm::stable, 0.3);
    cq::model::CausalHead<double> head(f.cfg, 3);
    typename cq::model::CausalHead<double>::Cache evaluated, trained;
    cq::Arena<double> grads(f.layout);
    const auto g = cq::model::HeadParams<double>::bind(grads);
    const cq::Arena<double>& cp = f.params;
    const auto p = cq::model::HeadParams<const double>::bind(cp);
    const cq::TensorView<const double, 2> z(f.z.data(), {f.M, 4});
    std::vector<double> dz(f.M * 4, 0.0);
    head.forward(p, z, f.head_targets(), mode, f.noise(mode), evaluated);
    CHECK(cqtest::error_message<cq::DomainError>([&] { head.backward(p, g, z, evaluated, {dz.data(), {f.M, 4}}); }) ==
          "causalqwen::CausalHead::backward: the cache holds no dL/dA: call loss_and_gradient before each backward");
    head.loss_and_gradient(p, z, f.head_targets(), mode, f.noise(mode), trained, g);
    const auto bits = [](const std::vector<double>& a, const std::vector<double>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
    };
    CHECK(std::memcmp(&evaluated.metrics.L_total, &trained.metrics.L_total, sizeof(double)) == 0);
    CHECK(bits(evaluated.ovr.L_cls, trained.ovr.L_cls));
    CHECK(bits(evaluated.ovr.prob_sum, trained.ovr.prob_sum));
    CHECK(bits(evaluated.ovr.max_prob, trained.ovr.max_prob));
    CHECK(evaluated.ovr.pred == trained.ovr.pred);
    for (auto v : {&cq::model::RegressionLoss<double>::Rows::loc_Y, &cq::model::RegressionLoss<double>::Rows::scale_Y,
                   &cq::model::RegressionLoss<double>::Rows::nll, &cq::model::RegressionLoss<double>::Rows::P_num,
                   &cq::model::RegressionLoss<double>::Rows::gate, &cq::model::RegressionLoss<double>::Rows::L_reg_gated})
      CHECK(bits(evaluated.regression.*v, trained.regression.*v));
    head.backward(p, g, z, trained, {dz.data(), {f.M, 4}});
    double dz_norm = 0;
    for (auto v : dz) dz_norm += v * v;
    CHECK(dz_norm > 0);
    // dA became dU in place: a second backward would count it twice, and is refused
    CHECK_THROWS_AS(head.backward(p, g, z, trained, {dz.data(), {f.M, 4}}), cq::DomainError);
  }
}
