// format_number's promise: find_numbers reads what it writes back as one number, up to the
// largest finite double.
#include <causalqwen/text/numbers.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

namespace text = causalqwen::text;

TEST_CASE("format_number near the largest double is read back by find_numbers") {
  const double largest = std::numeric_limits<double>::max();
  for (const double value : {largest, -largest, std::nextafter(largest, 0.0), 1.7976931348623e308,
                             9.9999999e307, 1.0e308}) {
    for (int digits = 1; digits <= 17; ++digits) {
      CAPTURE(value);
      CAPTURE(digits);
      const std::string written = text::format_number(value, {digits});
      CAPTURE(written);
      const auto found = text::find_numbers(written);
      REQUIRE(found.size() == 1);
      CHECK(found[0].begin == 0);
      CHECK(found[0].end == written.size());
      CHECK(std::isfinite(found[0].value));
      CHECK(std::fabs(found[0].value - value) <= std::fabs(value) * std::pow(10.0, 1 - digits));
    }
  }
}
