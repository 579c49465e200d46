// causalqwen forward --model DIR --inputs FILE.json --out FILE.safetensors [--grad] [--sampling]
//                    [--dtype f32|f64]
//
// Runs the model on one batch and writes every intermediate (F64 in the file, whatever the
// compute type): e, z, loc_U, scale_U, loc_S, scale_S, loc_Y, scale_Y, ovr_z, P, log_P,
// log_1mP, valid_mask, num_mask, L_cls, nll, P_num, gate, L_reg_gated, the scalars L_cls_mean,
// L_reg_eff, L_total, reg_mae, units_mean_loc, units_mean_scale, ovr_prob_sum, accuracy,
// num_accuracy, valid_count, num_count, and pred (I64). --grad adds grad.<tensor> =
// ∂L_total/∂tensor for every checkpoint tensor (deterministic mode); --sampling adds the
// sampling mode's sample.* tensors (the inputs must then hold "sampling").
// Position ids at or past the model's max_position_embeddings (config.json's, or
// format::default_max_position_embeddings when it states none) are refused; an output tensor
// holding NaN or an infinity is an error (exit 1), and then nothing is written.
#include "command.hpp"
#include "model_loading.hpp"

#include <causalqwen/train/batch_json.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

namespace {

namespace cq = causalqwen;

struct ForwardOptions {
  cqcli::ModelOptions model;
  cqcli::WeightsOption weights;
  std::string inputs, out, dtype = "f32";
  bool grad = false, sampling = false;
};

/// Collects tensors as F64 (or I64) and writes them in one safetensors file.
class OutputFile {
 public:
  template <class V>
  void add(const std::string& name, std::vector<std::size_t> shape, const V& values) {
    doubles_.emplace_back(values.begin(), values.end());
    const auto& added = doubles_.back();
    const auto bad = static_cast<std::size_t>(
        std::count_if(added.begin(), added.end(), [](double v) { return !std::isfinite(v); }));
    if (bad > 0 && non_finite_.empty()) non_finite_ = fmt::format("{} ({} values)", name, bad);
    if (bad > 0) ++non_finite_tensors_;
    writer_.add(name, std::move(shape), std::span<const double>(added));
  }
  void scalar(const std::string& name, double value) { add(name, {}, std::vector<double>{value}); }
  void add_int(const std::string& name, std::vector<std::size_t> shape, std::vector<std::int64_t> values) {
    ints_.push_back(std::move(values));
    writer_.add(name, std::move(shape), std::span<const std::int64_t>(ints_.back()));
  }
  /// Writes the file; a tensor holding NaN or an infinity is an error instead, naming the first.
  void write(const std::string& path) {
    if (non_finite_tensors_ > 0)
      throw cq::DomainError(fmt::format("forward: {} output tensors hold non-finite values, the first {}; "
                                        "nothing written to {}", non_finite_tensors_, non_finite_, path));
    writer_.write(path);
  }

 private:
  cq::format::SafetensorsWriter writer_;
  std::deque<std::vector<double>> doubles_;
  std::deque<std::vector<std::int64_t>> ints_;
  std::string non_finite_;
  std::size_t non_finite_tensors_ = 0;
};

template <class T>
void run_forward_typed(const ForwardOptions& o) {
  auto loaded = o.model.load<T>();
  o.weights.apply(*loaded.model);
  auto& model = *loaded.model;
  const auto& cfg = model.config();
  const auto data = cq::train::read_batch_json<T>(o.inputs, cfg.causal_size);
  if (loaded.max_position_embeddings)
    for (std::size_t i = 0; i < data.position_ids.size(); ++i)
      if (static_cast<std::size_t>(data.position_ids[i]) >= *loaded.max_position_embeddings)
        throw cq::FormatError(fmt::format("{}: field 'position_ids' [{}][{}] = {} must be below the model's "
                                          "max_position_embeddings {}", o.inputs, i / data.seq, i % data.seq,
                                          data.position_ids[i], *loaded.max_position_embeddings));
  const std::size_t B = data.batch, S = data.seq, H = cfg.hidden_size(), C = cfg.causal_size, K = cfg.num_classes;
  if (o.sampling && !data.has_sampling)
    throw cq::FormatError(fmt::format("{}: --sampling needs a field 'sampling' with temperature and uniform", o.inputs));
  const auto batch = data.view();
  typename cq::model::CausalQwen<T>::Cache cache;
  const auto metrics = model.evaluate(batch, cache);
  const auto hp = model.evaluation_head_params();
  const auto& h = cache.head;
  const auto full = model.head().full_vocabulary(hp, h);

  OutputFile out;
  const std::vector<std::size_t> bs{B, S}, bsh{B, S, H}, bsc{B, S, C}, bsk{B, S, K};
  out.add("e", bsh, cache.e);
  out.add("z", bsh, cache.backbone.z);
  out.add("loc_U", bsc, h.abduction.loc_U);
  out.add("scale_U", bsc, h.abduction.scale_U);
  out.add("loc_S", bsk, full.loc_S);
  out.add("scale_S", bsk, full.scale_S);
  out.add("loc_Y", bs, h.regression.loc_Y);
  out.add("scale_Y", bs, h.regression.scale_Y);
  out.add("ovr_z", bsk, full.ovr_z);
  out.add("P", bsk, full.P);
  out.add("log_P", bsk, full.log_P);
  out.add("log_1mP", bsk, full.log_1mP);
  out.add("valid_mask", bs, h.valid);
  out.add("num_mask", bs, h.num);
  std::vector<T> L_cls(h.ovr.L_cls);
  for (std::size_t m = 0; m < B * S; ++m) L_cls[m] = h.valid[m] ? L_cls[m] : T(0);
  out.add("L_cls", bs, L_cls);
  out.add("nll", bs, h.regression.nll);
  out.add("P_num", bs, h.regression.P_num);
  out.add("gate", bs, h.regression.gate);
  out.add("L_reg_gated", bs, h.regression.L_reg_gated);
  out.scalar("L_cls_mean", metrics.L_cls_mean);
  out.scalar("L_reg_eff", metrics.L_reg_eff);
  out.scalar("L_total", metrics.L_total);
  out.scalar("reg_mae", metrics.reg_mae);
  out.scalar("units_mean_loc", metrics.units_mean_loc);
  out.scalar("units_mean_scale", metrics.units_mean_scale);
  out.scalar("ovr_prob_sum", metrics.ovr_prob_sum);
  out.scalar("accuracy", metrics.accuracy);
  out.scalar("num_accuracy", metrics.num_accuracy);
  out.scalar("valid_count", static_cast<double>(metrics.valid_count));
  out.scalar("num_count", static_cast<double>(metrics.num_count));
  // pred for every position: argmax_k P_k (ties to the lowest id), from the full margins
  auto argmax_rows = [&](const std::vector<T>& values) {
    std::vector<std::int64_t> pred(B * S);
    for (std::size_t m = 0; m < B * S; ++m) {
      std::size_t best = 0;
      for (std::size_t k = 1; k < K; ++k)
        if (values[m * K + k] > values[m * K + best]) best = k;
      pred[m] = static_cast<std::int64_t>(best);
    }
    return pred;
  };
  out.add_int("pred", bs, argmax_rows(full.ovr_z));

  if (o.grad) {
    auto grads = model.make_gradients();
    typename cq::model::CausalQwen<T>::Cache grad_cache;
    model.train_step(batch, grad_cache, grads);
    for (const auto& slot : model.layout().slots()) {
      const T* g = grads.data() + slot.offset;
      out.add("grad." + slot.name, slot.shape, std::vector<T>(g, g + slot.size));
    }
  }
  if (o.sampling) {
    typename cq::model::CausalQwen<T>::Cache sc;
    const cq::model::SamplingNoise<T> noise{data.temperature, {data.uniform.data(), {B * S, C}}};
    model.evaluate(batch, sc, cq::model::ActionMode::sampling, noise);
    const auto sf = model.head().full_vocabulary(hp, sc.head);
    out.add("sample.epsilon", bsc, sc.head.action.epsilon);
    out.add("sample.loc_U", bsc, sc.head.action.loc_A);
    out.add("sample.loc_S", bsk, sf.loc_S);
    out.add("sample.scale_S", bsk, sf.scale_S);
    out.add("sample.ovr_z", bsk, sf.ovr_z);
    out.add("sample.P", bsk, sf.P);
    out.add("sample.loc_Y", bs, sc.head.regression.loc_Y);
    out.add("sample.scale_Y", bs, sc.head.regression.scale_Y);
    out.add_int("sample.pred", bs, argmax_rows(sf.ovr_z));
    out.add_int("sample.pred_by_loc", bs, argmax_rows(sf.loc_S));
  }
  out.write(o.out);
  fmt::print("L_total {:.6g} (L_cls_mean {:.6g}, L_reg_eff {:.6g}); wrote {}\n", metrics.L_total,
             metrics.L_cls_mean, metrics.L_reg_eff, o.out);
}

const cqcli::Registration reg_forward{"forward", [](CLI::App& app) {
  auto* sub = app.add_subcommand("forward", "Run the model on a batch and write every intermediate tensor");
  auto o = std::make_shared<ForwardOptions>();
  o->model.add_to(sub);
  o->weights.add_to(sub);
  sub->add_option("--inputs", o->inputs, "batch JSON (input_ids, numeric_values, attention_mask, labels, …)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", o->out, "output .safetensors file (F64 tensors)")->required();
  sub->add_flag("--grad", o->grad, "also write grad.<tensor> = dL_total/dtensor for every checkpoint tensor");
  sub->add_flag("--sampling", o->sampling, "also write the sampling mode's sample.* tensors");
  sub->add_option("--dtype", o->dtype, "compute type")->check(CLI::IsMember({"f32", "f64"}));
  sub->callback([o] {
    if (o->dtype == "f64") run_forward_typed<double>(*o);
    else run_forward_typed<float>(*o);
  });
}};

}  // namespace
