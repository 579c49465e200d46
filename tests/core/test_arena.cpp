// core/arena.hpp: named slots (packed and aligned), views with their rank checked, zeroing and
// versions; an arena of 4 MiB and more on 2 MiB boundaries and on huge pages, growing and
// shrinking; a small one on the heap.
#include <causalqwen/core/arena.hpp>
#include <causalqwen/core/process_usage.hpp>
#include <causalqwen/core/xt.hpp>
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace cq = causalqwen;

TEST_CASE("arena: named slices, packed slots, zeroing, versions") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("a", {3});
  layout->add("b", {2, 2}, cq::Placement::packed);
  layout->add("c", {5});
  CHECK(layout->slot("b").offset == 3);
  CHECK(layout->slot("c").offset == 16);
  CHECK(layout->count() == 12);
  cq::Arena<float> arena(layout);
  for (auto& v : arena.span()) CHECK(v == 0.0f);
  arena.view<2>("b")(1, 0) = 4.0f;
  CHECK(arena.data()[3 + 2] == 4.0f);
  CHECK_THROWS_WITH_AS(arena.view<1>("b"), "causalqwen::Arena::view: slot 'b' has rank 2, asked for 1",
                       cq::DomainError);
  CHECK_THROWS_WITH_AS(layout->add("a", {1}), "causalqwen::Layout::add: duplicate slot name 'a'", cq::DomainError);
  CHECK(reinterpret_cast<std::uintptr_t>(arena.view<1>("c").data) % 64 == 0);
  const auto v0 = arena.version();
  arena.touch();
  CHECK(arena.version() == v0 + 1);
  // slots are xtensor expressions too
  auto b = arena.view<2>("b");
  CHECK(xt::sum(b.xt())() == 4.0f);
  CHECK(b.xt().shape()[1] == 2);
  CHECK(b.flat2d().shape == cq::Shape<2>{2, 2});
  CHECK(b.reshape(cq::Shape<1>{4})[2] == 4.0f);
  CHECK_THROWS_WITH_AS(b.reshape(cq::Shape<1>{5}), "causalqwen::TensorView::reshape: cannot view [2,2] as [5]",
                       cq::DomainError);
  arena.zero();
  CHECK(arena.view<2>("b")(1, 0) == 0.0f);
}

TEST_CASE("a filled arena of 4 MiB and more sits on 2 MiB boundaries and, with transparent huge pages, faults once per 2 MiB") {
  auto layout = std::make_shared<cq::Layout>();
  layout->add("w", {std::size_t(16) << 20});  // 64 MiB of floats: 16,384 pages of 4 KiB
  const auto before = cq::ProcessUsage::now();
  cq::Arena<float> arena(layout);
  const long faults = (cq::ProcessUsage::now() - before).minor_faults;
  CHECK(reinterpret_cast<std::uintptr_t>(arena.data()) % (std::size_t(2) << 20) == 0);
  CHECK(arena.bytes() == std::size_t(64) << 20);
  bool all_zero = true;
  for (const float v : arena.span()) all_zero = all_zero && v == 0.0f;
  CHECK(all_zero);
  arena.span().back() = 3.0f;
  arena.zero();
  CHECK(arena.span().back() == 0.0f);
  // growing re-maps, shrinking keeps the mapping; both leave every element 0
  auto bigger = std::make_shared<cq::Layout>();
  bigger->add("w", {(std::size_t(16) << 20) + 1});
  arena.reset(bigger);
  CHECK(arena.bytes() == std::size_t(66) << 20);
  CHECK(arena.span().back() == 0.0f);
  arena.reset(layout);
  CHECK(arena.bytes() == std::size_t(66) << 20);
  // the fault count depends on the kernel's setting: "[never]" gives the 4 KiB pages. 4 KiB pages
  // fault 16,384 times; huge pages 32 times, plus 2,048 under AddressSanitizer, whose shadow
  // memory (an eighth of the arena) stays on 4 KiB pages
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string setting((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  MESSAGE("transparent huge pages: ", setting, "minor faults while building 64 MiB: ", faults);
  if (!setting.empty() && setting.find("[never]") == std::string::npos) CHECK(faults < 4096);
  // a small arena stays on the heap, 64-byte aligned
  auto small = std::make_shared<cq::Layout>();
  small->add("w", {1000});
  cq::Arena<float> heap(small);
  CHECK(reinterpret_cast<std::uintptr_t>(heap.data()) % 64 == 0);
}
