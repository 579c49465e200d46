/// The checkpoint names of CausalQwen's own parameters (stored beside the Hugging Face Qwen2
/// tensors, in the same safetensors file):
///   causal.num_direction [H]                    the numeric embedding's direction
///   causal.abduction.{loc,scale}.{weight,bias}  W [C,H], b [C]
///   causal.action.cls.{weight,bias}             W [K,C], b [K]
///   causal.action.reg.{weight,bias}             W [1,C], b [1]
///   causal.action.b_noise [C]                   the exogenous noise scale
///   causal.ovr_threshold [K]                    the OvR thresholds C_k
#pragma once
#include <string>

namespace causalqwen::model::names {
inline const std::string num_direction = "causal.num_direction";
inline const std::string abd_loc_w = "causal.abduction.loc.weight";
inline const std::string abd_loc_b = "causal.abduction.loc.bias";
inline const std::string abd_scale_w = "causal.abduction.scale.weight";
inline const std::string abd_scale_b = "causal.abduction.scale.bias";
inline const std::string cls_w = "causal.action.cls.weight";
inline const std::string cls_b = "causal.action.cls.bias";
inline const std::string reg_w = "causal.action.reg.weight";
inline const std::string reg_b = "causal.action.reg.bias";
inline const std::string b_noise = "causal.action.b_noise";
inline const std::string threshold = "causal.ovr_threshold";
}  // namespace causalqwen::model::names
