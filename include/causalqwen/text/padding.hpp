/// Where padding goes when rows of different lengths share one rectangular batch.
#pragma once

namespace causalqwen {

/// left: real tokens end at the last column (what batched generation needs: every row's next
/// token is appended at the same position); right: real tokens start at column 0.
enum class PaddingSide { left, right };

}  // namespace causalqwen
