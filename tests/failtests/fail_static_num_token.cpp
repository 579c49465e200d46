#include <causalqwen/model/causal_qwen.hpp>
namespace cqm = causalqwen::model;
// Must not compile; ctest requires the compiler to print the sentence below.
cqm::CausalQwen<float, cqm::StaticConfig<16, 8, 16, 2, 4, 2, 15, 15>> model;
