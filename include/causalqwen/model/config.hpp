/// CausalQwen's configuration: the Qwen2 backbone's shapes plus the causal heads' settings
/// (defaults below: C = H, γ = 10, threshold 10, b_noise = 0.1, α = 0). `validate()` names
/// the first field out of range.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/model/regression_head.hpp"
#include "causalqwen/nn/config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace causalqwen::model {

/// How log P and log(1 − P) enter the OvR BCE: the stable atan2/log1p forms (default), or seed
/// 000's log(P + ε), log(1 − P + ε) for comparison with the original code.
enum class BceForm { stable, epsilon };

struct CausalConfig {
  nn::TransformerConfig backbone;
  std::size_t causal_size = 0;     // C; must equal H for the identity initialisation of W_loc
  std::size_t num_classes = 0;     // K ≤ vocab_size: OvR classes (ids ≥ K: padding rows, never used)
  std::int64_t num_token_id = -1;  // <NUM>; must be < K
  bool tie_word_embeddings = true;  // lm_head = embed_tokens in the base model
  double gamma_init = 10.0;         // scale_U at initialisation: b_scale = softplus⁻¹(γ)
  std::vector<double> ovr_threshold = {10.0};  // one value for every class, or K values
  double reg_loss_weight = 1.0;  // λ
  double alpha_gate = 0.0;       // α: gate = m·(α + (1 − α)·P_<NUM>)
  double b_noise_init = 0.1;
  double reg_init_gain = 0.01;  // Xavier gain of the regression weight
  double reg_bias_init = 0.0;
  double scale_U_floor = 0.0;   // scale_U = floor + softplus(z·W_scaleᵀ + b_scale) ≥ floor (0: none)
  double scale_Y_floor = 0.0;   // scale_Y = floor + |w_reg|·scale_A ≥ floor (0: none)
  BceForm bce_form = BceForm::stable;
  double bce_epsilon = 1e-7;
  RegHead reg_head = RegHead::cauchy;  // how (loc_Y, scale_Y) is read and scored (model/regression_head.hpp)

  std::size_t hidden_size() const { return backbone.hidden_size; }

  /// Throws DomainError("causalqwen::<fn>: …") naming the first inconsistent field.
  void validate(const char* fn = "CausalConfig") const {
    using detail::require;
    backbone.validate(fn);
    require(causal_size == backbone.hidden_size, fn,
            "causal_size {} must equal hidden_size {} (W_loc is initialised to the identity)",
            causal_size, backbone.hidden_size);
    require(num_classes > 0 && num_classes <= backbone.vocab_size, fn,
            "num_classes {} must lie in [1, vocab_size = {}]", num_classes, backbone.vocab_size);
    require(num_token_id >= 0 && static_cast<std::size_t>(num_token_id) < num_classes, fn,
            "num_token_id {} must lie in [0, num_classes = {})", num_token_id, num_classes);
    require(gamma_init > 0, fn, "gamma_init must be > 0, got {}", gamma_init);
    require(ovr_threshold.size() == 1 || ovr_threshold.size() == num_classes, fn,
            "ovr_threshold must hold 1 or num_classes = {} values, got {}", num_classes,
            ovr_threshold.size());
    require(reg_loss_weight >= 0, fn, "reg_loss_weight must be >= 0, got {}", reg_loss_weight);
    require(alpha_gate >= 0 && alpha_gate <= 1, fn, "alpha_gate must lie in [0, 1], got {}",
            alpha_gate);
    require(bce_epsilon > 0, fn, "bce_epsilon must be > 0, got {}", bce_epsilon);
    require(scale_U_floor >= 0 && std::isfinite(scale_U_floor), fn, "scale_U_floor must be finite and >= 0, got {}",
            scale_U_floor);
    require(scale_Y_floor >= 0 && std::isfinite(scale_Y_floor), fn, "scale_Y_floor must be finite and >= 0, got {}",
            scale_Y_floor);
  }

  /// The threshold of class k (a single value applies to every class).
  double threshold(std::size_t k) const {
    return ovr_threshold.size() == 1 ? ovr_threshold[0] : ovr_threshold[k];
  }
};

}  // namespace causalqwen::model
