// core/page_buffer.hpp: a buffer of 4 MiB and more is a zeroed huge-page mapping, 2 MiB-aligned,
// faulted once per 2 MiB; moving hands the mapping over; a small buffer stays on the heap.
#include <causalqwen/core/page_buffer.hpp>
#include <causalqwen/core/process_usage.hpp>
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <utility>
#include <string>

namespace cq = causalqwen;

TEST_CASE("a PageBuffer of 4 MiB and more is a huge-page mapping: zero, 2 MiB-aligned, one fault per 2 MiB when written") {
  const std::size_t n = std::size_t(16) << 20;  // 64 MiB of floats
  const auto before = cq::ProcessUsage::now();
  cq::PageBuffer<float> big(n);
  float* p = big.data();
  bool all_zero = true;
  for (std::size_t i = 0; i < n; ++i) all_zero = all_zero && p[i] == 0.0f;
  for (std::size_t i = 0; i < n; ++i) p[i] = float(i % 7);  // the first writes fault the pages in
  const long faults = (cq::ProcessUsage::now() - before).minor_faults;
  CHECK(all_zero);
  CHECK(big.size() == n);
  CHECK(big.on_huge_pages());
  CHECK(reinterpret_cast<std::uintptr_t>(p) % cq::huge_page_bytes == 0);
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string setting((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  MESSAGE("transparent huge pages: ", setting, "minor faults while writing a 64 MiB PageBuffer: ", faults);
  // 4 KiB pages fault 16,384 times; huge pages 32 times (plus AddressSanitizer's shadow pages)
  if (!setting.empty() && setting.find("[never]") == std::string::npos) CHECK(faults < 4096);
  // moving hands the mapping over; the moved-from buffer holds nothing
  cq::PageBuffer<float> moved(std::move(big));
  CHECK(moved.data() == p);
  CHECK(moved[n - 1] == float((n - 1) % 7));
  CHECK(big.data() == nullptr);
  // a small buffer stays on the heap, 64-byte aligned and zero
  const cq::PageBuffer<std::uint16_t> small(1000);
  CHECK_FALSE(small.on_huge_pages());
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
  bool small_zero = true;
  for (std::size_t i = 0; i < small.size(); ++i) small_zero = small_zero && small[i] == 0;
  CHECK(small_zero);
  CHECK(cq::PageBuffer<float>(0).data() == nullptr);
}
