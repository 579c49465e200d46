/// A small grouped calibration report shared by the calibration tests and the SVG tests: five
/// <NUM> predictions (y, loc, scale) in two groups (one with characters that need escaping), and
/// positions whose predicted token is the label two times in three.
#pragma once
#include <causalqwen/eval/calibration.hpp>

#include <cstddef>
#include <vector>

namespace cqtest {

/// One <NUM> target and its prediction, as the head left them.
struct NumberSample {
  double y, loc, scale;
};

/// The five samples the grouped report is made of.
inline std::vector<NumberSample> grouped_samples() {
  return {{1.0, 1.5, 0.5}, {3.0, 2.0, 2.0}, {-4.0, 0.5, 1.0}, {2.0, 2.25, 0.1}, {10, 0, 3}};
}

/// Adds `samples` to `grouped`'s overall tally and to the groups "plain" (even i) and
/// "a<b & \"c\"" (odd i), numbers and tokens (label 7 or 2, predicted 7).
inline void add_grouped_samples(causalqwen::eval::GroupedCalibration& grouped, const std::vector<NumberSample>& samples) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    auto& group = grouped.group(i % 2 ? "a<b & \"c\"" : "plain");
    grouped.overall().numbers.add(s.y, s.loc, s.scale);
    group.numbers.add(s.y, s.loc, s.scale);
    grouped.overall().tokens.add(i % 3 ? 7 : 2, 7, 0.1 + 0.17 * double(i), 1.5);
    group.tokens.add(i % 3 ? 7 : 2, 7, 0.1 + 0.17 * double(i), 1.5);
  }
}

}  // namespace cqtest
