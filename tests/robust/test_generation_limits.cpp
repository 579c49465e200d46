// Generator::run refuses a max_new_tokens for which prompt length + max_new_tokens would wrap
// (SIZE_MAX, or -1 read into a size_t) or pass its stated limit, with a DomainError, before it
// sizes any buffer.
#include <causalqwen/generate/generator.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace cqm = causalqwen::model;
namespace cqg = causalqwen::generate;

namespace {

/// vocab 40 (K = 34 classes), H 16, two layers, <NUM> = 33.
cqm::CausalConfig tiny_config() {
  cqm::CausalConfig c;
  c.backbone = {40, 16, 24, 2, 4, 2, 1e-6, 1e4};
  c.causal_size = 16;
  c.num_classes = 34;
  c.num_token_id = 33;
  c.ovr_threshold = {0.5};
  c.gamma_init = 1.0;
  return c;
}

}  // namespace

TEST_CASE_TEMPLATE("Generator::run refuses max_new_tokens that would wrap or pass the limit", T, float, double) {
  cqm::CausalQwen<T> model(tiny_config());
  model.init_random(7, 0.3);
  const std::vector<cqg::PromptInput> prompts = {{{1, 2, 3}, {}, cqg::row_seed(7, 0)}};
  for (const std::size_t n : {std::numeric_limits<std::size_t>::max(),
                              std::numeric_limits<std::size_t>::max() - 2,
                              std::size_t{1} << 40}) {
    CAPTURE(n);
    cqg::GenerationOptions opts;
    opts.max_new_tokens = n;
    CHECK_THROWS_AS((void)cqg::Generator<T>(model).run(prompts, opts), causalqwen::DomainError);
  }
}
