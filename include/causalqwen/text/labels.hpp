/// Label conventions shared by the text, model and train layers.
#pragma once
#include <cstdint>

namespace causalqwen {

/// The label of a position that takes no part in the loss (the Hugging Face convention, −100):
/// padding, the last position of a sequence, or a position whose next token was cut away.
inline constexpr std::int64_t ignore_index = -100;

}  // namespace causalqwen
