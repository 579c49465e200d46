// trainer_state.json bytes → read_trainer_state (every field's type) → restore_rng on its 'rng'.
#include "fuzz_target.hpp"

#include <causalqwen/train/training_state.hpp>

#include <random>

void run_one(std::string_view bytes) {
  namespace train = causalqwen::train;
  const auto path = cqfuzz::as_file(bytes, "trainer_state.json");
  cqfuzz::refused_or_ok([&] {
    const auto state = train::read_trainer_state(path);
    std::mt19937_64 rng;
    train::restore_rng(rng, state.rng);
  });
}
