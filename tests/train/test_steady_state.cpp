// After the first step, a training step (forward, backward, clip, AdamW or StreamingAdamW) and a
// prefill with decode steps on the KV cache allocate nothing and touch no new page: every
// buffer they use was sized by the first step. This program replaces malloc & co. (glibc lets
// an executable interpose them) to count the allocations made while the steps run (any size,
// from any code, the BLAS's included; must be 0) and reads getrusage's minor page faults (0 in
// at least one window of steps: see check_steady). oneDNN's matmul (the bf16 and int8 products of
// many rows where it runs AMX: linalg/kernels/onednn_bf16.hpp) builds a small map of its
// arguments at every execute (its C API offers no way around it): allocations made with a
// frame of libdnnl on the stack are counted apart, and must each be small (< 4096 bytes).
#include <causalqwen/model.hpp>
#include <causalqwen/generate/next_token.hpp>
#include <causalqwen/core/random.hpp>
#include <causalqwen/optim/adamw.hpp>
#include <causalqwen/optim/clip.hpp>
#include <causalqwen/optim/streaming_adamw.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {

std::atomic<bool> counting{false};
std::atomic<std::uint64_t> allocations{0}, large_allocations{0}, largest{0}, onednn_allocations{0}, onednn_large{0};
constexpr std::size_t small_bytes = 4096;

/// The address range of libdnnl's loaded segments (empty when the program does not load it).
struct Range {
  std::uintptr_t begin = 0, end = 0;
};
Range onednn_range() {
  static const Range range = [] {
    Range r;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) {
          if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libdnnl") == nullptr) return 0;
          auto* range = static_cast<Range*>(out);
          for (int i = 0; i < info->dlpi_phnum; ++i)
            if (info->dlpi_phdr[i].p_type == PT_LOAD) {
              const std::uintptr_t b = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr, e = b + info->dlpi_phdr[i].p_memsz;
              range->begin = range->begin ? std::min(range->begin, b) : b;
              range->end = std::max(range->end, e);
            }
          return 1;
        },
        &r);
    void* warm[4];
    backtrace(warm, 4);  // loads the unwinder now, not while counting
    return r;
  }();
  return range;
}
thread_local bool in_count = false;

/// Whether the allocation being counted comes from inside libdnnl (a frame of it on the stack).
bool from_onednn() {
  const Range r = onednn_range();
  if (r.begin == 0 || in_count) return false;
  in_count = true;
  void* frames[16];
  const int n = backtrace(frames, 16);
  in_count = false;
  for (int i = 0; i < n; ++i) {
    const auto a = reinterpret_cast<std::uintptr_t>(frames[i]);
    if (a >= r.begin && a < r.end) return true;
  }
  return false;
}

void count(std::size_t bytes) {
  if (!counting.load(std::memory_order_relaxed) || in_count) return;
  if (from_onednn()) {
    onednn_allocations.fetch_add(1, std::memory_order_relaxed);
    if (bytes >= small_bytes) onednn_large.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (bytes >= small_bytes) large_allocations.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t seen = largest.load(std::memory_order_relaxed);
  while (bytes > seen && !largest.compare_exchange_weak(seen, bytes)) {
  }
}

}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  count(n);
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count(n * size);
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  count(n);
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace cq = causalqwen;
namespace cqm = causalqwen::model;

namespace {

/// What one batch of steps asked for.
struct Usage {
  std::uint64_t allocations, large_allocations, largest, minor_faults, onednn_allocations, onednn_large;
};

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// Runs `step` `times` times with the counters on.
template <class F>
Usage measure(int times, F&& step) {
  allocations = 0, large_allocations = 0, largest = 0, onednn_allocations = 0, onednn_large = 0;
  (void)onednn_range();
  const long faults = minor_faults();
  counting = true;
  for (int i = 0; i < times; ++i) step();
  counting = false;
  return {allocations.load(), large_allocations.load(), largest.load(),
          static_cast<std::uint64_t>(minor_faults() - faults), onednn_allocations.load(), onednn_large.load()};
}

cqm::CausalConfig config() {
  auto c = cqm::preset_config("tiny", 63);  // H 64, F 176, 2 layers, 4 heads, 2 KV heads, 64 classes
  c.ovr_threshold = {1.0};
  return c;
}

/// bench_train_step's small shape: V = K 8192, H 256, FFN 704, 4 layers, 4 heads, 2 KV heads.
cqm::CausalConfig bench_small_config() {
  cqm::CausalConfig c;
  c.backbone = {8192, 256, 704, 4, 4, 2, 1e-6, 1e6};
  c.num_classes = 8192;
  c.causal_size = 256;
  c.num_token_id = 8191;
  c.ovr_threshold = {1.0};
  return c;
}

void report(const char* what, int steps, const Usage& u) {
  std::printf("%s, %d steps: %llu allocations (%llu of >= %zu bytes, largest %llu bytes), %llu minor faults; "
              "inside oneDNN's execute %llu small allocations (%llu of >= %zu bytes)\n",
              what, steps, static_cast<unsigned long long>(u.allocations),
              static_cast<unsigned long long>(u.large_allocations), small_bytes,
              static_cast<unsigned long long>(u.largest), static_cast<unsigned long long>(u.minor_faults),
              static_cast<unsigned long long>(u.onednn_allocations), static_cast<unsigned long long>(u.onednn_large), small_bytes);
}

/// A batch of B×S tokens with a <NUM> every 7th position and next-token labels and targets.
struct StepBatch {
  std::size_t B = 2, S = 48;
  std::vector<std::int64_t> ids, labels;
  std::vector<float> values, targets;
  /// Token ids below `num_id`, which is <NUM>.
  StepBatch(std::uint64_t seed, std::int64_t num_id, std::size_t batch = 2, std::size_t seq = 48)
      : B(batch), S(seq), ids(B * S), labels(B * S, -100), values(B * S, 0.0f), targets(B * S, 0.0f) {
    for (std::size_t i = 0; i < B * S; ++i) {
      ids[i] = static_cast<std::int64_t>(cq::splitmix64(seed + i) % static_cast<std::uint64_t>(num_id));
      if (i % 7 == 3) ids[i] = num_id, values[i] = static_cast<float>(i) * 0.25f;
    }
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t + 1 < S; ++t)
        labels[b * S + t] = ids[b * S + t + 1], targets[b * S + t] = values[b * S + t + 1];
  }
  cqm::Batch<float> view() const {
    return {{ids.data(), {B, S}}, {values.data(), {B, S}}, {}, {labels.data(), {B, S}}, {targets.data(), {B, S}}, {}};
  }
};

/// One warm-up step, then windows of five steps that must allocate nothing. Page faults: a step
/// that faults by design (a buffer freed and mapped again) faults in every window; the kernel
/// can also fault a page now and then for its own reasons (a code page reclaimed under memory
/// pressure, a thread's stack), so the least count over the three windows after the first must
/// be 0.
template <class Step>
void check_steady(const char* what, Step&& step) {
  step();  // the first step sizes every arena, cache, moment and scratch
  const int steps = 5;
  const Usage after_first = measure(steps, step);
  report(what, steps, after_first);
  CHECK(after_first.allocations == 0);
  CHECK(after_first.onednn_large == 0);
  std::uint64_t least_faults = ~std::uint64_t{0};
  for (int window = 0; window < 3 && least_faults > 0; ++window) {
    const Usage later = measure(steps, step);
    report(what, steps, later);
    CHECK(later.allocations == 0);
    CHECK(later.onednn_large == 0);
    least_faults = std::min(least_faults, later.minor_faults);
  }
  CHECK(least_faults == 0);
}

/// Checks training steps of `model` on `batch` with StreamingAdamW (bf16 moments), keeping up to
/// `keep_tiles_bytes` of the norm's tiles for the update.
void check_streaming_steps(const char* what, cqm::CausalQwen<float>& model, const cqm::Batch<float>& batch,
                           std::size_t keep_tiles_bytes = 0) {
  cqm::CausalQwen<float>::Cache cache;
  cq::optim::StreamingAdamW<float> opt(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()),
                                       cq::optim::MomentStorage::bf16);
  opt.set_tile_cache_bytes(keep_tiles_bytes);
  check_steady(what, [&] {
    model.train_step(batch, cache, opt.target());
    const double norm = opt.grad_norm(model.params());
    opt.step(model.params(), 1e-3, cq::optim::clip_factor(norm, 1.0));
  });
}

/// The tiny model decoding greedily on its KV cache: prefill(prompt, slots), then step() per token.
struct GreedyDecoder {
  cqm::CausalQwen<float> model;
  cq::generate::NextTokenHead<float> head;
  cqm::HeadParams<const float> head_params;  // refreshed by use_weights
  std::vector<cq::generate::StepDecision> decision = std::vector<cq::generate::StepDecision>(1);
  cq::generate::DecodeSettings deterministic;
  typename cqm::CausalQwen<float>::InferenceState state;
  std::size_t H;

  GreedyDecoder(const cqm::CausalConfig& cfg, std::uint64_t seed) : model(cfg), head(cfg), H(cfg.backbone.hidden_size) {
    model.init_random(seed);
    head_params = model.head_params();
  }
  /// Packed copies of the weights read by decoding (bf16: the bf16 product; int8: the integer dot products).
  void use_weights(cq::linalg::Format type) {
    model.use_weights(type);
    head_params = model.head_params();
  }
  /// A prompt of `prompt_length` ids below 63: (i·stride + seed) mod 63.
  static std::vector<std::int64_t> prompt(std::size_t prompt_length, std::uint64_t seed, std::uint64_t stride) {
    std::vector<std::int64_t> ids(prompt_length);
    for (std::size_t i = 0; i < prompt_length; ++i) ids[i] = static_cast<std::int64_t>((i * stride + seed) % 63);
    return ids;
  }
  void prefill(const std::vector<std::int64_t>& ids, std::size_t slots) {
    const std::size_t S = ids.size();
    model.begin_inference(state, 1, slots);
    const auto z = model.forward_cached({ids.data(), {1, S}}, {}, {}, {}, state);
    head.step(head_params, {z.data + (S - 1) * H, {1, H}}, deterministic, {}, decision);
  }
  void step() {
    std::int64_t token = decision[0].token;
    const auto z1 = model.forward_cached({&token, {1, 1}}, {}, {}, {}, state);
    head.step(head_params, {z1.data, {1, H}}, deterministic, {}, decision);
  }
};

}  // namespace

TEST_CASE("steady state: a decode past every earlier length reallocates its scratch a few times per doubling, not per step") {
  // Attention's products while decoding grow with the cache, one key per step, and with them the
  // scratch of the products (the packed blocks of the float GEMM, the block of scores): sized
  // exactly, a buffer was replaced every 16 keys (2, 5 and 10 allocations from 42 to 80, 160 and
  // 320 tokens); grown geometrically, the count per doubling stays flat. The products' scratch is
  // per thread and lives for the whole program, so this case comes first in the file (doctest
  // runs a file's cases in order): the larger products of the others would have sized it already.
  const auto seed = cqtest::test_seed(64, "steady-state long decode");
  GreedyDecoder decoder(config(), seed);
  const std::size_t S = 40, longest = 8 * S;
  decoder.prefill(GreedyDecoder::prompt(S, seed, 11), longest);
  std::size_t length = S;
  const auto decode_to = [&](std::size_t end) {
    for (; length < end; ++length) decoder.step();
  };
  decode_to(S + 2);  // the first decoding steps size what a single token needs
  std::vector<std::uint64_t> per_doubling;
  for (std::size_t end = 2 * S; end <= longest; end *= 2) {
    const Usage u = measure(1, [&] { decode_to(end); });
    const std::string what = "decode to " + std::to_string(end) + " tokens";
    report(what.c_str(), 1, u);
    per_doubling.push_back(u.allocations);
  }
  REQUIRE(per_doubling.size() == 3);
  CHECK(per_doubling.back() <= per_doubling.front() + 2);
}

TEST_CASE("steady state: a training step allocates nothing and faults no page") {
  const auto seed = cqtest::test_seed(61, "steady-state training step");
  cqm::CausalQwen<float> model(config());
  model.init_random(seed);
  cqm::CausalQwen<float>::Cache cache;
  const StepBatch data(seed, 63);
  const auto batch = data.view();

  const auto adamw_steps = [&](const char* what) {
    auto grads = model.make_gradients();
    cq::optim::AdamW<float> adam(model.params().shared_layout(), {}, cqm::parameter_rules(model.layout()));
    check_steady(what, [&] {
      grads.zero();
      model.train_step(batch, cache, grads);
      const double norm = cq::optim::global_grad_norm(grads, adam.rules());
      adam.step(model.params(), grads, 1e-3, cq::optim::clip_factor(norm, 1.0), model.update_follower());
    });
  };
  SUBCASE("AdamW with a gradient arena") { adamw_steps("training step (AdamW)"); }
  SUBCASE("StreamingAdamW (factors kept, bf16 moments)") { check_streaming_steps("training step (StreamingAdamW)", model, batch); }
  SUBCASE("AdamW, mixed precision (the layers' products in bf16, reading the bf16 copies AdamW keeps)") {
    model.set_precision(cq::linalg::Format::bf16);
    adamw_steps("training step (AdamW, bf16 products, kept copies)");
    CHECK(model.bf16_copies_current());
  }
  SUBCASE("AdamW, mixed precision (each product rounding W itself)") {
    model.set_precision(cq::linalg::Format::bf16, cq::linalg::WeightCopies::none);
    adamw_steps("training step (AdamW, bf16 products)");
  }
}

TEST_CASE("steady state: StreamingAdamW on bench_train_step's small shape allocates nothing after the first step") {
  // at the identity initialisation two products' inputs can hold equal values: factors must
  // not be shared by value, or the second step needs one buffer more than the first
  const auto seed = cqtest::test_seed(63, "steady-state streaming, small shape");
  cqm::CausalQwen<float> model(bench_small_config());
  model.init_random(seed);
  const StepBatch data(seed, 8191, 4, 128);
  check_streaming_steps("training step, small shape (StreamingAdamW)", model, data.view());
  // W_cls's tiles (8192 × 256 floats, 8 MiB) kept from the norm for the update: a buffer sized once
  check_streaming_steps("training step, small shape (StreamingAdamW, tiles kept)", model, data.view(), std::size_t{16} << 20);
}

TEST_CASE("steady state: a prefill and decode steps allocate nothing and fault no page, with f32, bf16 and int8 weights") {
  const auto seed = cqtest::test_seed(62, "steady-state prefill and decode");
  GreedyDecoder decoder(config(), seed);
  const std::size_t S = 40, decode_steps = 6;
  const auto prompt = GreedyDecoder::prompt(S, seed, 13);
  for (const auto type : {cq::linalg::Format::f32, cq::linalg::Format::bf16, cq::linalg::Format::int8}) {
    CAPTURE(cq::linalg::format_name(type));
    decoder.use_weights(type);
    auto generate = [&] {
      decoder.prefill(prompt, S + decode_steps);
      for (std::size_t s = 0; s < decode_steps; ++s) decoder.step();
    };
    check_steady("prefill + 6 decode steps", generate);
  }
}

TEST_CASE("steady state: a shape check that passes makes no text, one that fails names both shapes") {
  // a message is formatted only on failure: the text of [16,1024,151936] (16 characters) would
  // not fit a std::string's inline buffer and would allocate on every check of every step
  std::vector<float> data(16 * 3 * 5);
  const cq::TensorView<float, 3> long_extents(data.data(), {16, 1024, 151936});
  std::size_t rows = 0;
  const Usage passing = measure(100, [&] {
    cq::require_shape(long_extents, {16, 1024, 151936}, "check", "X");
    rows += long_extents.reshape(cq::Shape<2>{16 * 1024, 151936}).shape[0];
  });
  CHECK(rows == 100 * 16 * 1024);
  report("100 passing shape checks of [16,1024,151936]", 100, passing);
  CHECK(passing.allocations == 0);
  const cq::TensorView<float, 3> small(data.data(), {16, 3, 5});
  CHECK_THROWS_WITH_AS(cq::require_shape(small, {16, 3, 6}, "check", "X"),
                       "causalqwen::check: X must have shape [16,3,6], got [16,3,5]", cq::DomainError);
  CHECK_THROWS_WITH_AS((void)small.reshape(cq::Shape<2>{7, 11}), "causalqwen::TensorView::reshape: cannot view [16,3,5] as [7,11]",
                       cq::DomainError);
  CHECK(cq::shape_string(cq::Shape<0>{}) == "[]");
  CHECK(cq::shape_string(std::vector<std::size_t>{2, 5, 8}) == "[2,5,8]");
}
