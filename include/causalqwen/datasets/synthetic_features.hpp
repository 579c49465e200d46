/// The synthetic-features mode: the backbone is replaced by generated feature
/// vectors z [H], so that the causal heads can be studied alone, in seconds.
///
/// The generative story (all parameters drawn once from train::SplitMix64(seed); rows from the
/// source's own stream):
///   prototypes   μ_k ~ N(0, prototype_scale²·I_H), k = 0…K−1
///   value map    w ~ N(0, value_scale²/H·I_H), bias b = value_bias
///   a row        y = num_token_id with probability num_share, else uniform over the other
///                K−1 classes; z = μ_y + noise_std·ε, ε ~ N(0, I_H);
///                target value t = w·z + b + Cauchy(0, value_noise_scale) when y = <NUM>, else 0.
/// What an ideal head reaches:
///   classes  the Bayes rule argmax_k [log π_k − |z − μ_k|²/(2·noise_std²)] (bayes_class);
///            its accuracy is ideal_accuracy() (estimated on fresh rows, near 1 when the
///            prototypes are far apart compared with noise_std·√2);
///   values   loc_Y = w·z + b is linear in z, so the heads can represent it exactly; the ideal
///            Cauchy NLL is log(4π·γ) with γ = value_noise_scale (E log(1 + r²) = 2 log 2 for a
///            standard Cauchy r), and the median absolute error is γ (the mean absolute error
///            of Cauchy noise does not exist).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/train/random.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::datasets {

struct FeatureStoryOptions {
  std::size_t hidden = 64;        ///< H
  std::size_t num_classes = 16;   ///< K
  std::int64_t num_token_id = 15; ///< <NUM>, in [0, K)
  std::size_t rows = 256;         ///< M rows per batch
  double prototype_scale = 1.0;
  double noise_std = 0.5;
  double num_share = 0.25;
  double value_scale = 10.0;
  double value_bias = 0.0;
  double value_noise_scale = 0.1;  ///< γ of the Cauchy noise on target values
  std::uint64_t seed = 0;

  nlohmann::json to_json() const {
    return {{"hidden", hidden}, {"num_classes", num_classes}, {"num_token_id", num_token_id},
            {"rows", rows}, {"prototype_scale", prototype_scale}, {"noise_std", noise_std},
            {"num_share", num_share}, {"value_scale", value_scale}, {"value_bias", value_bias},
            {"value_noise_scale", value_noise_scale}, {"seed", fmt::format("{}", seed)}};
  }
};

/// A train::FeatureBatchSource telling the story above.
template <class T>
class SyntheticFeatureSource final : public train::FeatureBatchSource<T> {
 public:
  explicit SyntheticFeatureSource(FeatureStoryOptions options) : options_(options) {
    const char* fn = "datasets::SyntheticFeatureSource";
    detail::require(options_.hidden > 0 && options_.rows > 0, fn, "hidden and rows must be > 0");
    detail::require(options_.num_classes >= 2, fn, "num_classes must be ≥ 2, got {}", options_.num_classes);
    detail::require(options_.num_token_id >= 0 &&
                        static_cast<std::size_t>(options_.num_token_id) < options_.num_classes,
                    fn, "num_token_id {} must lie in [0, {})", options_.num_token_id, options_.num_classes);
    detail::require(options_.num_share >= 0 && options_.num_share <= 1, fn,
                    "num_share must lie in [0, 1], got {}", options_.num_share);
    detail::require(options_.noise_std > 0 && options_.value_noise_scale > 0 && options_.prototype_scale >= 0,
                    fn, "noise_std and value_noise_scale must be > 0, prototype_scale ≥ 0");
    train::SplitMix64 rng(splitmix64(options_.seed) ^ 0xFEA7u);
    const std::size_t H = options_.hidden, K = options_.num_classes;
    prototypes_.resize(K * H);
    for (auto& m : prototypes_) m = options_.prototype_scale * rng.normal();
    weights_.resize(H);
    for (auto& w : weights_) w = options_.value_scale / std::sqrt(double(H)) * rng.normal();
    rng_.set_state(splitmix64(options_.seed + 1));
  }

  /// The next M rows of (z, label, target value).
  train::FeatureBatch<T> next() override {
    train::FeatureBatch<T> b;
    const std::size_t H = options_.hidden, M = options_.rows;
    b.rows = M;
    b.hidden = H;
    b.features.resize(M * H);
    b.labels.resize(M);
    b.target_values.assign(M, T(0));
    std::vector<double> z(H);
    for (std::size_t r = 0; r < M; ++r) {
      const std::int64_t y = draw_label();
      for (std::size_t h = 0; h < H; ++h) z[h] = prototypes_[std::size_t(y) * H + h] + options_.noise_std * rng_.normal();
      for (std::size_t h = 0; h < H; ++h) b.features[r * H + h] = static_cast<T>(z[h]);
      b.labels[r] = y;
      if (y == options_.num_token_id)
        b.target_values[r] = static_cast<T>(rng_.cauchy(value_loc(z), options_.value_noise_scale));
    }
    ++batches_;
    return b;
  }

  /// {"source": "features", "options": …, "rng": state, "batches": n}.
  nlohmann::json state() const override {
    return {{"source", "features"}, {"options", options_.to_json()},
            {"rng", fmt::format("{}", rng_.state())}, {"batches", batches_}};
  }

  /// Continues from state(); FormatError when it belongs to another story or is malformed.
  void restore(const nlohmann::json& s) override {
    const std::string where = "causalqwen::datasets::SyntheticFeatureSource::restore: ";
    if (!s.is_object() || s.value("source", std::string()) != "features")
      throw FormatError(where + "not a feature source state: " + s.dump().substr(0, 200));
    if (!s.contains("options") || s["options"] != options_.to_json())
      throw FormatError(where + "the state's options " + (s.contains("options") ? s["options"].dump() : "(missing)") +
                        " differ from this source's " + options_.to_json().dump());
    if (!s.contains("rng") || !s["rng"].is_string() || !s.contains("batches") || !s["batches"].is_number_unsigned())
      throw FormatError(where + "fields 'rng' (a decimal string) and 'batches' are required");
    const std::string r = s["rng"].get<std::string>();
    std::uint64_t v = 0;
    for (char c : r) {
      if (c < '0' || c > '9') throw FormatError(where + "field 'rng' must be a decimal string, got " + r);
      v = v * 10 + std::uint64_t(c - '0');
    }
    rng_.set_state(v);
    batches_ = s["batches"].get<std::uint64_t>();
  }

  /// w·z + b: the ideal loc_Y.
  double value_loc(std::span<const double> z) const {
    double v = options_.value_bias;
    for (std::size_t h = 0; h < z.size(); ++h) v += weights_[h] * z[h];
    return v;
  }
  /// The Bayes rule's class for z (see the top of this file).
  std::int64_t bayes_class(std::span<const double> z) const {
    const std::size_t H = options_.hidden, K = options_.num_classes;
    const double other = (1 - options_.num_share) / double(K - 1);
    std::int64_t best = 0;
    double best_score = -INFINITY;
    for (std::size_t k = 0; k < K; ++k) {
      const double prior = std::int64_t(k) == options_.num_token_id ? options_.num_share : other;
      if (prior <= 0) continue;
      double d = 0;
      for (std::size_t h = 0; h < H; ++h) d += (z[h] - prototypes_[k * H + h]) * (z[h] - prototypes_[k * H + h]);
      const double score = std::log(prior) - d / (2 * options_.noise_std * options_.noise_std);
      if (score > best_score) best_score = score, best = std::int64_t(k);
    }
    return best;
  }
  /// The Bayes rule's accuracy, estimated on `rows` fresh rows (from a separate generator).
  double ideal_accuracy(std::size_t rows = 4096) const {
    SyntheticFeatureSource copy(options_);
    copy.rng_.set_state(splitmix64(options_.seed ^ 0xACC0ACC0u));
    std::size_t hits = 0, seen = 0;
    while (seen < rows) {
      const auto b = copy.next();
      std::vector<double> z(b.hidden);
      for (std::size_t r = 0; r < b.rows && seen < rows; ++r, ++seen) {
        for (std::size_t h = 0; h < b.hidden; ++h) z[h] = double(b.features[r * b.hidden + h]);
        hits += bayes_class(z) == b.labels[r];
      }
    }
    return double(hits) / double(rows);
  }
  /// log(4π·γ): the ideal mean Cauchy NLL of the target values.
  double ideal_nll() const { return std::log(4 * std::numbers::pi * options_.value_noise_scale); }

  const FeatureStoryOptions& options() const { return options_; }
  const std::vector<double>& prototypes() const { return prototypes_; }  ///< [K,H]
  const std::vector<double>& value_weights() const { return weights_; }  ///< w [H]

 private:
  std::int64_t draw_label() {
    if (rng_.chance(options_.num_share)) return options_.num_token_id;
    const auto k = static_cast<std::int64_t>(rng_.below(options_.num_classes - 1));
    return k >= options_.num_token_id ? k + 1 : k;
  }

  FeatureStoryOptions options_;
  std::vector<double> prototypes_, weights_;
  train::SplitMix64 rng_;
  std::uint64_t batches_ = 0;
};

}  // namespace causalqwen::datasets
