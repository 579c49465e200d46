/// The process-wide choice between a product's instruction-set kernel and its portable loop
/// (which gives the same bits, for tests and comparisons). Each product names its own choice
/// type, an `enum class { automatic, …, portable }` (F32Kernel, Bf16Kernel, Int8Kernel), so that
/// one product's choice cannot be handed to another's setter; the storage and the rule live here.
#pragma once
#include <atomic>

namespace causalqwen::linalg {

/// The current choice of type `Choice` (automatic until set), one per type and process.
template <class Choice>
std::atomic<Choice>& kernel_choice() {
  static std::atomic<Choice> choice{Choice::automatic};
  return choice;
}

/// Whether the instruction-set kernel runs: the choice is automatic and the CPU has the
/// instructions (`cpu_has`).
template <class Choice>
bool kernel_runs_on_hardware(bool cpu_has) {
  return kernel_choice<Choice>() == Choice::automatic && cpu_has;
}

}  // namespace causalqwen::linalg
