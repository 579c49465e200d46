/// The process-wide choice between a product's instruction-set kernels and its portable loop
/// (which gives the same bits, for tests and comparisons). Each product names its own choice
/// type, an `enum class { automatic, avx2, portable }` (F32Kernel, Bf16Kernel, Int8Kernel), and
/// its own instruction-set type, an `enum class { <its AVX-512 kernel>, avx2, portable }`, so
/// that one product's choice cannot be handed to another's setter; the storage and the rule
/// live here.
#pragma once
#include <atomic>

namespace causalqwen::linalg {

/// The current choice of type `Choice` (automatic until set), one per type and process.
template <class Choice>
std::atomic<Choice>& kernel_choice() {
  static std::atomic<Choice> choice{Choice::automatic};
  return choice;
}

/// Whether this CPU runs AVX2 and FMA (asked once).
inline bool cpu_has_avx2_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

/// The instruction set that the current choice of type `Choice` gives on this CPU: `wide` (the
/// product's AVX-512 kernel) when the choice is automatic and the CPU has its instructions
/// (`cpu_has_wide`), else AVX2 with FMA unless the choice is portable and when the CPU has them,
/// else the portable loop (a kernel the CPU lacks falls back to the next one down).
template <class Choice, class Isa>
Isa kernel_isa(bool cpu_has_wide, Isa wide) {
  const Choice choice = kernel_choice<Choice>();
  if (choice == Choice::automatic && cpu_has_wide) return wide;
  if (choice != Choice::portable && cpu_has_avx2_fma()) return Isa::avx2;
  return Isa::portable;
}

}  // namespace causalqwen::linalg
