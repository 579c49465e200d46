/// Something derived from parameter matrices, row by row, that an optimiser keeps current while
/// it updates them: mixed-precision training's bf16 copies of the weights
/// (linalg/bf16_copies.hpp). The optimiser walks each slot the follower follows in blocks of
/// rows and hands over every block right after updating it, while the block is in the core's
/// cache, so the copy costs no second pass over the weights through memory.
///
/// The protocol of one optimiser step over an arena:
///   h = follow(slot)              for every slot (before its update): a handle, or not_followed
///   rows_updated(h, rows, r0, r1) for every block of rows [r0, r1) of a followed slot, on the
///                                 optimiser's threads (disjoint blocks may run at once);
///                                 `rows` points at row r0's new values in the arena
///   step_done(version)            once, after the arena's version was bumped, and only when
///                                 every row of every followed slot was handed over
/// An optimiser that updates only part of the arena (a shard) calls none of these, and the
/// follower then knows its copies are stale (their version is not the arena's).
#pragma once
#include "causalqwen/core/arena.hpp"

#include <cstddef>
#include <cstdint>

namespace causalqwen::linalg {

template <class T>
class UpdateFollower {
 public:
  static constexpr std::ptrdiff_t not_followed = -1;

  virtual ~UpdateFollower() = default;
  /// A handle for the slot's rows (its rows = its first dimension), or not_followed.
  virtual std::ptrdiff_t follow(const Layout::Slot& slot) const = 0;
  /// Rows [r0, r1) of the followed slot `handle` hold their new values, from `rows` on.
  virtual void rows_updated(std::ptrdiff_t handle, const T* rows, std::size_t r0, std::size_t r1) = 0;
  /// The step is over and every followed row was handed over: the arena is at `version`.
  virtual void step_done(std::uint64_t version) = 0;
};

}  // namespace causalqwen::linalg
