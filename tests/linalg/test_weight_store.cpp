// WeightStore: the registration of an arena's matrices, their training forms (bf16 products,
// with bf16 copies while the copies hold the arena's version, rounding after any other change),
// their decoding forms (packed bf16 / int8 copies, current until the parameters change), |W| on
// request (made once per parameter version, float and double), the bytes of each kind, and the
// refusals with their messages.
#include "../support/test_support.hpp"

#include <causalqwen/core/bfloat16.hpp>
#include <causalqwen/linalg/weight_store.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace cq = causalqwen;
namespace la = causalqwen::linalg;
using cq::TensorView;

namespace {

/// An arena with a q|k|v-like matrix (three consecutive slots of 37 columns, 45 rows), a bias
/// and a second matrix [9,20], filled with N(0,1).
struct Params {
  std::shared_ptr<cq::Layout> layout = std::make_shared<cq::Layout>();
  cq::Arena<float> arena;
  Params() {
    layout->add("m.q", {20, 37});
    layout->add("m.k", {13, 37}, cq::Placement::packed);
    layout->add("m.v", {12, 37}, cq::Placement::packed);
    layout->add("m.bias", {45});
    layout->add("w", {9, 20});
    arena.reset(layout);
    std::mt19937_64 rng(cqtest::test_seed(65, "weight store"));
    std::normal_distribution<float> normal;
    for (auto& x : arena.span()) x = normal(rng);
  }
  TensorView<const float, 2> qkv() const { return {arena.view<2>("m.q").data, {45, 37}}; }
  TensorView<const float, 2> w() const { return arena.view<2>("w"); }
};

/// One optimiser step's protocol (linalg/update_follower.hpp) without an optimiser: every slot
/// the follower follows handed over in blocks of `block` rows, the version bumped, step_done.
void follower_step(cq::Arena<float>& p, la::UpdateFollower<float>& f, std::size_t block = 4) {
  std::vector<std::pair<std::ptrdiff_t, const cq::Layout::Slot*>> followed;
  for (const auto& s : p.layout().slots())
    if (const auto h = f.follow(s); h != la::UpdateFollower<float>::not_followed) followed.push_back({h, &s});
  for (auto& x : p.span()) x *= 0.5f;  // the "update"
  for (const auto& [h, s] : followed) {
    const std::size_t rows = s->shape[0], cols = s->size / rows;
    for (std::size_t r0 = 0; r0 < rows; r0 += block) f.rows_updated(h, p.data() + s->offset + r0 * cols, r0, std::min(rows, r0 + block));
  }
  p.touch();
  f.step_done(p.version());
}

/// Whether the bf16 copy `c` holds bf16 of w [N,C] (in the products' panels or in rows).
bool holds_bf16_of(const la::PackedRef& c, TensorView<const float, 2> w) {
  for (std::size_t r = 0; r < w.shape[0]; ++r)
    for (std::size_t j = 0; j < w.shape[1]; ++j) {
      const std::size_t k = c.rows_layout ? r * c.cols_padded + j : la::panel_index(r, j, c.cols_padded);
      if (c.bf16[k] != cq::float_to_bf16(w.data[r * w.shape[1] + j])) return false;
    }
  return true;
}

}  // namespace

TEST_CASE("WeightStore registers views of its arena in order and starts with no forms: f32 products, no copies") {
  Params p;
  la::WeightStore<float> store;
  CHECK(store.add(p.arena, p.qkv()) == 0);
  CHECK(store.add(p.arena, p.w()) == 1);
  CHECK(store.size() == 2);
  CHECK(store.shape(0) == cq::Shape<2>{45, 37});
  CHECK(store.shape(1) == cq::Shape<2>{9, 20});
  CHECK(store.precision() == la::Format::f32);
  CHECK(store.weight_type() == la::Format::f32);
  CHECK(store.update_follower() == nullptr);
  CHECK(store.bf16_copy_bytes() == 0);
  CHECK(store.packed_bytes() == 0);
  CHECK(!store.bf16_copies_current(p.arena.version()));
  CHECK(store.decoding_current(p.arena.version()));
  CHECK(store.training_forms(p.arena.version()).size() == 2);
  CHECK(store.decoding_forms().size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& t = store.training_forms(i, p.arena.version());
    CHECK(t.precision == la::Format::f32);
    CHECK(!t.bf16_copy.packed());
    CHECK(!t.decode.packed());
    CHECK(!store.decoding_forms(i).decode.packed());
  }
  // a view of another buffer, or of another arena, is refused
  std::vector<float> other(9 * 20);
  CHECK_THROWS_WITH_AS(store.add(p.arena, TensorView<const float, 2>(other.data(), {9, 20})),
                       "causalqwen::WeightStore::add: the matrix [9,20] is not a view of the parameter arena", cq::DomainError);
  CHECK_THROWS_WITH_AS(store.training_forms(2, p.arena.version()), "causalqwen::WeightStore: no matrix 2: 2 are registered",
                       cq::DomainError);
}

TEST_CASE("WeightStore's training forms: bf16 products read the copies while they hold the arena's version, "
          "round W after any other change, and WeightCopies::none keeps none") {
  Params p;
  la::WeightStore<float> store;
  store.add(p.arena, p.qkv());
  store.add(p.arena, p.w());
  store.set_precision(p.arena, la::Format::bf16);
  CHECK(store.precision() == la::Format::bf16);
  REQUIRE(store.update_follower() != nullptr);
  CHECK(store.bf16_copy_bytes() == (48 * 48 + 12 * 32) * 2);  // rows padded to 4, columns to 16
  // not current before a step has handed every row over: the products round W
  CHECK(!store.bf16_copies_current(p.arena.version()));
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(store.training_forms(i, p.arena.version()).precision == la::Format::bf16);
    CHECK(!store.training_forms(i, p.arena.version()).bf16_copy.packed());
  }
  follower_step(p.arena, *store.update_follower());
  const auto v = p.arena.version();
  CHECK(store.bf16_copies_current(v));
  const auto forms = store.training_forms(v);
  REQUIRE(forms.size() == 2);
  CHECK(forms[0].precision == la::Format::bf16);
  CHECK(forms[0].bf16_copy.type == la::Format::bf16);
  CHECK(forms[0].bf16_copy.rows == 45);
  CHECK(forms[0].bf16_copy.cols == 37);
  CHECK(forms[1].bf16_copy.rows == 9);
  CHECK(holds_bf16_of(forms[0].bf16_copy, p.qkv()));
  CHECK(holds_bf16_of(forms[1].bf16_copy, p.w()));
  // any other change of the parameters: rounding again until the next step
  p.arena.touch();
  CHECK(!store.bf16_copies_current(p.arena.version()));
  CHECK(!store.training_forms(0, p.arena.version()).bf16_copy.packed());
  CHECK(store.training_forms(0, p.arena.version()).precision == la::Format::bf16);
  follower_step(p.arena, *store.update_follower(), 7);
  CHECK(store.bf16_copies_current(p.arena.version()));
  CHECK(holds_bf16_of(store.training_forms(0, p.arena.version()).bf16_copy, p.qkv()));
  // registering after the copies exist is refused (they would not cover the new matrix)
  CHECK_THROWS_WITH_AS(store.add(p.arena, p.w()),
                       "causalqwen::WeightStore::add: matrices are registered before set_precision keeps bf16 copies and "
                       "use_weights packs them",
                       cq::DomainError);
  // no copies kept: bf16 products that round W, no follower
  store.set_precision(p.arena, la::Format::bf16, la::WeightCopies::none);
  CHECK(store.update_follower() == nullptr);
  CHECK(store.bf16_copy_bytes() == 0);
  CHECK(!store.bf16_copies_current(p.arena.version()));
  CHECK(store.training_forms(1, p.arena.version()).precision == la::Format::bf16);
  CHECK(!store.training_forms(1, p.arena.version()).bf16_copy.packed());
  // back to f32: no copies, f32 products
  store.set_precision(p.arena, la::Format::bf16);
  store.set_precision(p.arena, la::Format::f32);
  CHECK(store.update_follower() == nullptr);
  CHECK(store.bf16_copy_bytes() == 0);
  CHECK(store.training_forms(0, p.arena.version()).precision == la::Format::f32);
  // int8 is no arithmetic of products
  CHECK_THROWS_WITH_AS(store.set_precision(p.arena, la::Format::int8, la::WeightCopies::kept, "M::set_precision"),
                       "causalqwen::M::set_precision: training products run in f32 or bf16, not int8", cq::DomainError);
}

TEST_CASE("WeightStore's decoding forms: packed bf16 / int8 copies of the rounded matrices, current until the "
          "parameters change; f32 drops them") {
  for (const auto type : {la::Format::bf16, la::Format::int8}) {
    CAPTURE(la::format_name(type));
    Params p;
    la::WeightStore<float> store;
    store.add(p.arena, p.qkv());
    store.add(p.arena, p.w());
    std::vector<float> rounded_qkv(p.qkv().data, p.qkv().data + 45 * 37), rounded_w(p.w().data, p.w().data + 9 * 20);
    la::round_weights(type, {rounded_qkv.data(), {45, 37}});
    la::round_weights(type, {rounded_w.data(), {9, 20}});
    const auto before = p.arena.version();
    store.use_weights(p.arena, type);
    CHECK(p.arena.version() != before);  // the values were rounded in place
    CHECK(store.weight_type() == type);
    CHECK(store.decoding_current(p.arena.version()));
    CHECK(std::memcmp(p.qkv().data, rounded_qkv.data(), rounded_qkv.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(p.w().data, rounded_w.data(), rounded_w.size() * sizeof(float)) == 0);
    const la::PackedMatrix a(type, p.qkv()), b(type, p.w());
    CHECK(store.packed_bytes() == a.bytes() + b.bytes());
    const auto forms = store.decoding_forms();
    REQUIRE(forms.size() == 2);
    CHECK(forms[0].decode.type == type);
    CHECK(forms[0].decode.rows == 45);
    CHECK(forms[1].decode.cols == 20);
    CHECK(forms[0].precision == la::Format::f32);
    CHECK(!forms[0].bf16_copy.packed());
    std::size_t differ = 0;
    for (std::size_t r = 0; r < 45; ++r)
      for (std::size_t j = 0; j < 37; ++j) {
        const std::size_t k = la::panel_index(r, j, forms[0].decode.cols_padded);
        const float got = type == la::Format::bf16 ? cq::bf16_to_float(forms[0].decode.bf16[k])
                                                   : float(forms[0].decode.q[k]) * forms[0].decode.row_scale[r];
        differ += got != a.at(r, j);
      }
    CHECK(differ == 0);
    // the training forms are not the decoding ones
    CHECK(!store.training_forms(0, p.arena.version()).decode.packed());
    // a change of the parameters makes the copies stale: refused, with the type named
    p.arena.touch();
    CHECK(!store.decoding_current(p.arena.version()));
    CHECK(cqtest::error_message<cq::DomainError>([&] { store.require_decoding_current(p.arena.version(), "M::forward_cached"); }) ==
          "causalqwen::M::forward_cached: the parameters changed after use_weights(" + std::string(la::format_name(type)) +
              ") packed them: call use_weights again");
    store.use_weights(p.arena, la::Format::f32);
    CHECK(store.packed_bytes() == 0);
    CHECK(!store.decoding_forms(0).decode.packed());
    p.arena.touch();
    CHECK(store.decoding_current(p.arena.version()));
    CHECK_NOTHROW(store.require_decoding_current(p.arena.version(), "M::forward_cached"));
  }
}

TEST_CASE("WeightStore<double> registers matrices and refuses bf16 products and packed copies") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("w", {4, 8});
  cq::Arena<double> arena(layout);
  la::WeightStore<double> store;
  CHECK(store.add(arena, arena.view<2>("w")) == 0);
  CHECK_THROWS_WITH_AS(store.set_precision(arena, la::Format::bf16, la::WeightCopies::kept, "M::set_precision"),
                       "causalqwen::M::set_precision: bf16 products serve float models only", cq::DomainError);
  CHECK_THROWS_WITH_AS(store.use_weights(arena, la::Format::int8, "M::use_weights"),
                       "causalqwen::M::use_weights: int8 weights serve float models only", cq::DomainError);
  CHECK_THROWS_WITH_AS(store.use_weights(arena, la::Format::bf16), "causalqwen::WeightStore::use_weights: bf16 weights serve float models only",
                       cq::DomainError);
  store.set_precision(arena, la::Format::f32);
  store.use_weights(arena, la::Format::f32);
  CHECK(store.update_follower() == nullptr);
  CHECK(store.training_forms(0, arena.version()).precision == la::Format::f32);
  CHECK(store.decoding_current(arena.version()));
  // an arena other than the one the matrices were registered in
  auto other_layout = std::make_shared<cq::Layout>();
  other_layout->add("w", {5, 8});
  cq::Arena<double> other(other_layout);
  CHECK_THROWS_WITH_AS(store.use_weights(other, la::Format::f32, "M::use_weights"),
                       "causalqwen::M::use_weights: the arena holds 40 values, the store's matrices were registered in one of 32",
                       cq::DomainError);
}

namespace {
/// Whether a [N,C] holds |w| exactly.
template <class T>
bool holds_abs_of(TensorView<const T, 2> a, TensorView<const T, 2> w) {
  if (a.shape != w.shape) return false;
  for (std::size_t i = 0; i < w.size(); ++i)
    if (a.data[i] != std::fabs(w.data[i])) return false;
  return true;
}
}  // namespace

TEST_CASE("WeightStore's |W|: made on request, kept while the parameters are current, remade after a change") {
  Params p;
  la::WeightStore<float> store;
  store.add(p.arena, p.qkv());
  store.add(p.arena, p.w());
  CHECK(store.abs_bytes() == 0);  // nothing before a request
  CHECK(store.abs_rebuilds(0) == 0);
  const auto a = store.abs(p.arena, 1);
  CHECK(holds_abs_of<float>(a, p.w()));
  CHECK(store.abs_rebuilds(1) == 1);
  CHECK(store.abs_rebuilds(0) == 0);              // only the matrix asked for
  CHECK(store.abs_bytes() == 9 * 20 * sizeof(float));
  // current: the same buffer, not made again
  const auto again = store.abs(p.arena, 1);
  CHECK(again.data == a.data);
  CHECK(store.abs_rebuilds(1) == 1);
  // a change of the parameters (an optimiser step: new values, the version moved on) remakes it
  // at the next request, in the same buffer
  for (auto& x : p.arena.span()) x = -2.0f * x + 0.25f;
  CHECK(store.abs_rebuilds(1) == 1);  // not before it is asked for
  p.arena.touch();
  const auto after = store.abs(p.arena, 1);
  CHECK(store.abs_rebuilds(1) == 2);
  CHECK(after.data == a.data);
  CHECK(holds_abs_of<float>(after, p.w()));
  // a matrix spanning consecutive slots (q|k|v), and use_weights' rounding (a new version)
  CHECK(holds_abs_of<float>(store.abs(p.arena, 0), p.qkv()));
  store.use_weights(p.arena, la::Format::bf16);
  CHECK(holds_abs_of<float>(store.abs(p.arena, 0), p.qkv()));
  CHECK(store.abs_rebuilds(0) == 2);
  CHECK(store.abs_bytes() == (45 * 37 + 9 * 20) * sizeof(float));
  CHECK(cqtest::error_message<cq::DomainError>([&] { store.abs(p.arena, 2); }) ==
        "causalqwen::WeightStore: no matrix 2: 2 are registered");
}

TEST_CASE("WeightStore<double>'s |W|: exact, remade after a change of version only") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("b", {3});
  layout->add("w", {4, 8});
  cq::Arena<double> arena(layout);
  std::mt19937_64 rng(cqtest::test_seed(66, "weight store abs double"));
  std::normal_distribution<double> normal;
  for (auto& x : arena.span()) x = normal(rng);
  la::WeightStore<double> store;
  store.add(arena, arena.view<2>("w"));
  const auto w = arena.view<2>("w");
  CHECK(holds_abs_of<double>(store.abs(arena, 0), w));
  store.abs(arena, 0);
  CHECK(store.abs_rebuilds(0) == 1);
  CHECK(store.abs_bytes() == 32 * sizeof(double));
  arena.view<2>("w")(2, 5) = -7.5;
  arena.touch();
  const auto a = store.abs(arena, 0);
  CHECK(store.abs_rebuilds(0) == 2);
  CHECK(a(2, 5) == 7.5);
  CHECK(holds_abs_of<double>(a, w));
}
