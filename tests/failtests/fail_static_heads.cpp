#include <causalqwen/model/causal_qwen.hpp>
namespace cqm = causalqwen::model;
// Must not compile; ctest requires the compiler to print the sentence below.
cqm::CausalQwen<float, cqm::StaticConfig{.vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_layers = 2,
                                         .num_heads = 3, .num_kv_heads = 1, .causal_size = 8,
                                         .num_classes = 15, .num_token_id = 14}> model;
