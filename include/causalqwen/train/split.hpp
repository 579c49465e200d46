/// The train/validation split of a text data set, decided by the text alone:
///
///   split(text) = validation  ⇔  fnv1a64(salt ‖ text) mod 1,000,000 < validation_fraction·10⁶
///
/// A text's side depends only on its bytes (and the salt), never on where or how often it
/// occurs, so the two sides cannot share a text: a line repeated in a JSONL file, or a
/// synthetic sentence generated twice, always lands on the same side.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/train/random.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace causalqwen::train {

enum class DataSplit { train, validation };

/// "train" or "val".
inline const char* split_name(DataSplit s) { return s == DataSplit::train ? "train" : "val"; }

/// Parses "train" or "val"/"validation" (DomainError otherwise).
inline DataSplit parse_split(std::string_view name) {
  if (name == "train") return DataSplit::train;
  if (name == "val" || name == "validation") return DataSplit::validation;
  throw DomainError("causalqwen::train::parse_split: expected \"train\" or \"val\", got \"" +
                    std::string(name) + "\"");
}

/// How texts are assigned to the two sides (see the top of this file).
struct SplitRule {
  double validation_fraction = 0.1;  ///< in [0, 1]
  std::string salt = "causalqwen";   ///< another salt gives another (equally disjoint) split

  /// The side of `text`.
  DataSplit side_of(std::string_view text) const {
    detail::require(validation_fraction >= 0 && validation_fraction <= 1, "train::SplitRule",
                    "validation_fraction must lie in [0, 1], got {}", validation_fraction);
    const std::uint64_t h = fnv1a64(text, fnv1a64(salt));
    const auto threshold = static_cast<std::uint64_t>(validation_fraction * 1'000'000.0 + 0.5);
    return (h % 1'000'000u) < threshold ? DataSplit::validation : DataSplit::train;
  }
};

}  // namespace causalqwen::train
