// Shared check of the optimisers' freezing (model::parameter_rules with Freeze::backbone): after some steps,
// every backbone slot and the fixed threshold must be bit-identical to before, with a zero
// optimiser state, while the causal.* heads move.
#pragma once
#include <causalqwen/core/arena.hpp>
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace cqtest {

/// Requires the frozen slots of `params` to equal `before` bit for bit and `state` (a moment or
/// momentum arena of the same layout) to be 0 there; returns how many causal.* elements changed.
template <class T>
std::size_t require_only_heads_changed(const causalqwen::Arena<T>& params, const std::vector<T>& before,
                                       const causalqwen::Arena<T>& state) {
  std::size_t changed_causal = 0;
  for (const auto& slot : params.layout().slots()) {
    const T* now = params.data() + slot.offset;
    const bool frozen = !slot.name.starts_with("causal.") || slot.name == "causal.ovr_threshold";
    for (std::size_t i = 0; i < slot.size; ++i) {
      if (frozen) {
        REQUIRE_MESSAGE(std::memcmp(&now[i], &before[slot.offset + i], sizeof(T)) == 0, slot.name);
        REQUIRE(state.data()[slot.offset + i] == T(0));
      } else {
        changed_causal += now[i] != before[slot.offset + i];
      }
    }
  }
  return changed_causal;
}

}  // namespace cqtest
