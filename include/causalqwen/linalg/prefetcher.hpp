/// Software prefetching of a block that the next step of a product will pack, spread over the
/// tiles of this step, for the bf16 and float products.
#pragma once
#include <algorithm>
#include <cstddef>

namespace causalqwen::linalg {

/// The cache lines of a float block (rows of `row_floats` values, `ld` apart, from `first`),
/// requested into L2 a few at a time (prefetch_some, once per tile call), so that the packing of
/// the next task or block reads them from cache: the reads from memory then overlap this one's
/// multiply-adds instead of stalling the packer.
class Prefetcher {
 public:
  Prefetcher() = default;
  Prefetcher(const float* first, std::size_t ld, std::size_t rows, std::size_t row_floats, std::size_t calls)
      : first_(first), ld_(ld), per_row_((row_floats + 15) / 16), total_(per_row_ * rows),
        per_call_((total_ + calls - 1) / std::max<std::size_t>(calls, 1)) {}
  void prefetch_some() {
    for (std::size_t i = 0; i < per_call_ && done_ < total_; ++i, ++done_) {
      __builtin_prefetch(first_ + row_ * ld_ + 16 * line_, 0, 2);
      if (++line_ == per_row_) line_ = 0, ++row_;  // the next line (no division per line)
    }
  }

 private:
  const float* first_ = nullptr;
  std::size_t ld_ = 0, per_row_ = 1, total_ = 0, per_call_ = 0, done_ = 0, row_ = 0, line_ = 0;
};

}  // namespace causalqwen::linalg
