// KV cache: a prefill followed by decode steps gives, at every token position, the z of the
// full forward pass over the whole sequence (same masks and positions), for several batch
// shapes with left and right padding, and chunked prefills; and the cache's bf16 storage.
#include "../support/qwen2_stack.hpp"
#include "../support/test_support.hpp"

#include <causalqwen/nn/transformer.hpp>

#include <algorithm>
#include <random>
#include <vector>

namespace cq = causalqwen;
namespace nn = causalqwen::nn;

namespace {

/// A batch laid out in slots: prompt lengths `lens` padded (left or right) to the longest,
/// then `extra` generated slots; positions count the row's real tokens (padding: 0).
struct Layout {
  std::size_t B = 0, S = 0;
  std::vector<std::int64_t> ids, mask, pos;
  std::vector<double> values;
};

Layout make_layout(const std::vector<std::size_t>& lens, std::size_t extra, bool left, std::mt19937_64& rng,
                   std::size_t vocab) {
  Layout l;
  l.B = lens.size();
  const std::size_t P = *std::max_element(lens.begin(), lens.end());
  l.S = P + extra;
  l.ids.assign(l.B * l.S, 0);
  l.mask.assign(l.B * l.S, 0);
  l.pos.assign(l.B * l.S, 0);
  l.values.assign(l.B * l.S, 0.0);
  std::uniform_int_distribution<std::int64_t> id(0, static_cast<std::int64_t>(vocab) - 1);
  std::normal_distribution<double> num(0.0, 50.0);
  for (std::size_t b = 0; b < l.B; ++b) {
    std::int64_t count = 0;
    for (std::size_t s = 0; s < l.S; ++s) {
      const bool real = s >= P || (left ? s >= P - lens[b] : s < lens[b]);
      const std::size_t m = b * l.S + s;
      l.ids[m] = real ? id(rng) : 0;
      l.mask[m] = real;
      l.values[m] = real && s % 3 == 1 ? num(rng) : 0.0;
      l.pos[m] = real ? count++ : 0;
    }
  }
  return l;
}

template <class T>
void check_case(const std::vector<std::size_t>& lens, std::size_t extra, bool left, std::size_t prefill_chunk,
                std::uint64_t seed, double tol) {
  nn::TransformerConfig cfg{.vocab_size = 50, .hidden_size = 32, .intermediate_size = 48, .num_layers = 2,
                            .num_heads = 4, .num_kv_heads = 2, .rms_norm_eps = 1e-6, .rope_theta = 1e4};
  cqtest::Qwen2Stack<T> model(cfg);
  model.init_random(seed, 0.2);
  std::mt19937_64 rng(seed + 7);
  const auto l = make_layout(lens, extra, left, rng, cfg.vocab_size);
  std::vector<T> values(l.values.begin(), l.values.end());
  typename cqtest::Qwen2Stack<T>::Cache full_cache;
  const auto z_full = model.forward({l.ids.data(), {l.B, l.S}}, {values.data(), {l.B, l.S}},
                                    {l.mask.data(), {l.B, l.S}}, {l.pos.data(), {l.B, l.S}}, full_cache);
  const std::vector<T> full(z_full.begin(), z_full.end());

  typename cqtest::Qwen2Stack<T>::InferenceState state;
  model.begin_inference(state, l.B, /*slots=*/2);  // small on purpose: the cache must grow
  const std::size_t P = l.S - extra, H = cfg.hidden_size;
  std::vector<T> inc(l.B * l.S * H, T(0));
  // steps: the prompt in chunks of prefill_chunk slots, then one slot at a time
  std::vector<std::pair<std::size_t, std::size_t>> steps;
  for (std::size_t s = 0; s < P; s += prefill_chunk) steps.push_back({s, std::min(P, s + prefill_chunk)});
  for (std::size_t s = P; s < l.S; ++s) steps.push_back({s, s + 1});
  for (const auto& [s0, s1] : steps) {
    const std::size_t n = s1 - s0;
    std::vector<std::int64_t> ids(l.B * n), mask(l.B * n), pos(l.B * n);
    std::vector<T> v(l.B * n);
    for (std::size_t b = 0; b < l.B; ++b)
      for (std::size_t s = 0; s < n; ++s) {
        ids[b * n + s] = l.ids[b * l.S + s0 + s];
        mask[b * n + s] = l.mask[b * l.S + s0 + s];
        pos[b * n + s] = l.pos[b * l.S + s0 + s];
        v[b * n + s] = values[b * l.S + s0 + s];
      }
    // positions given explicitly on even steps, derived from the cache's counts on odd ones
    const bool explicit_pos = (s0 % 2) == 0;
    const auto z = model.forward_cached({ids.data(), {l.B, n}}, {v.data(), {l.B, n}}, {mask.data(), {l.B, n}},
                                        explicit_pos ? cq::TensorView<const std::int64_t, 2>(pos.data(), {l.B, n})
                                                     : cq::TensorView<const std::int64_t, 2>{},
                                        state);
    for (std::size_t b = 0; b < l.B; ++b)
      for (std::size_t s = 0; s < n; ++s)
        std::copy_n(z.data + (b * n + s) * H, H, inc.data() + (b * l.S + s0 + s) * H);
  }
  CHECK(state.backbone.kv.length == l.S);
  double worst = 0, rms = 0;
  std::size_t count = 0;
  for (std::size_t m = 0; m < l.B * l.S; ++m) {
    if (!l.mask[m]) continue;
    for (std::size_t j = 0; j < H; ++j) {
      worst = std::max(worst, std::fabs(double(inc[m * H + j]) - double(full[m * H + j])));
      rms += double(full[m * H + j]) * double(full[m * H + j]);
      ++count;
    }
  }
  rms = std::sqrt(rms / double(count));
  INFO("B=", l.B, " S=", l.S, left ? " left" : " right", " chunk=", prefill_chunk, " worst=", worst, " rms=", rms);
  CHECK(worst <= tol * rms);
}

}  // namespace

TEST_CASE_TEMPLATE("KV cache: prefill + decode equals the full forward at every token", T, float, double) {
  const auto seed = cqtest::test_seed(20261201, "kv_cache_equality");
  const double tol = std::is_same_v<T, double> ? 1e-12 : 2e-5;
  for (bool left : {true, false}) {
    check_case<T>({5}, 4, left, 5, seed, tol);             // B=1, no padding
    check_case<T>({3, 7, 1}, 5, left, 7, seed + 1, tol);   // B=3, mixed lengths, one-token prompt
    check_case<T>({6, 6}, 3, left, 2, seed + 2, tol);      // B=2, prefill in chunks of 2
    check_case<T>({70, 20}, 3, left, 70, seed + 3, tol);   // crosses a 64-token attention block
    check_case<T>({9, 2, 4, 9}, 2, left, 3, seed + 4, tol);
  }
}

TEST_CASE("KV cache: wrong batch is an error") {
  nn::TransformerConfig cfg{.vocab_size = 10, .hidden_size = 8, .intermediate_size = 8, .num_layers = 1,
                            .num_heads = 2, .num_kv_heads = 1, .rms_norm_eps = 1e-6, .rope_theta = 1e4};
  cqtest::Qwen2Stack<double> model(cfg);
  model.init_random(1);
  cqtest::Qwen2Stack<double>::InferenceState state;
  model.begin_inference(state, 2);
  std::vector<std::int64_t> ids{1, 2, 3};
  CHECK(cqtest::error_message<cq::DomainError>([&] {
          model.forward_cached({ids.data(), {1, 3}}, {}, {}, {}, state);
        }).find("the cache holds 2 rows") != std::string::npos);
}

TEST_CASE("KV cache: bf16 storage holds each key and value rounded once, through growth and back to float") {
  // A cache of 2 rows × 2 KV heads × D = 20 (not a multiple of 16: padded panels), filled in float,
  // turned to bf16 (every value rounded to nearest even), grown (the keys move within their
  // panels), turned back to float (exact): each value is then bf16(the original); the bf16
  // cache takes 2 bytes per value of its panels (half a float cache when D is a multiple of 16).
  const std::uint64_t seed = cqtest::test_seed(20261128, "kv_cache_bf16_storage");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::size_t B = 2, layers = 2, nkv = 2, D = 20, n = 37;
  nn::KvCache<float> kv;
  kv.reset(B, layers, nkv, D, n);
  CHECK(kv.capacity == 48);  // a multiple of 16
  std::vector<float> original(layers * B * nkv * n * D);
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t g = 0; g < nkv; ++g)
        for (std::size_t t = 0; t < n; ++t)
          for (std::size_t d = 0; d < D; ++d) {
            const float x = normal(rng);
            original[(((l * B + b) * nkv + g) * n + t) * D + d] = x;
            kv.key_block(l, b, g)[t * D + d] = x;
            kv.value_block(l, b, g)[t * D + d] = -x;
          }
  kv.length = n;
  const std::size_t float_bytes = kv.bytes(), mask_bytes = kv.mask.size() * sizeof(std::int64_t);
  kv.use_storage(nn::KvStorage::bf16);
  CHECK(kv.keys.empty());
  // Kᵀ rows padded to 4 (20), V rows to 16 (32) values of 2 bytes, against 2 × 20 floats per slot
  CHECK(float_bytes - mask_bytes == layers * B * nkv * kv.capacity * 2 * D * 4);
  CHECK(kv.bytes() - mask_bytes == layers * B * nkv * kv.capacity * (20 + 32) * 2);
  kv.reserve(100);  // grows to 112 slots
  CHECK(kv.capacity == 112);
  kv.use_storage(nn::KvStorage::bf16);  // already bf16: nothing happens
  kv.use_storage(nn::KvStorage::f32);
  CHECK(kv.key_panels.empty());
  std::size_t differ = 0;
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t g = 0; g < nkv; ++g)
        for (std::size_t t = 0; t < n; ++t)
          for (std::size_t d = 0; d < D; ++d) {
            const float rounded = cq::bf16_to_float(cq::float_to_bf16(original[(((l * B + b) * nkv + g) * n + t) * D + d]));
            differ += kv.key_block(l, b, g)[t * D + d] != rounded;
            differ += kv.value_block(l, b, g)[t * D + d] != -rounded;
          }
  INFO("seed ", seed);
  CHECK(differ == 0);
  // a double cache has no bf16 storage
  nn::KvCache<double> kd;
  kd.reset(1, 1, 1, 4, 4);
  CHECK(cqtest::error_message<cq::DomainError>([&] { kd.use_storage(nn::KvStorage::bf16); })
            .find("bf16 storage holds the keys of a float model only") != std::string::npos);
}
