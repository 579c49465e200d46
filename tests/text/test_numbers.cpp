// Number recognition policies (numbers.hpp), value parsing and formatting.
#include <causalqwen/text/numbers.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace text = causalqwen::text;

namespace {
struct Found {
  std::string spelling;
  double value;
};
std::vector<Found> numbers_in(const std::string& s) {
  std::vector<Found> out;
  for (const auto& m : text::find_numbers(s)) out.push_back({s.substr(m.begin, m.end - m.begin), m.value});
  return out;
}
std::vector<std::string> spellings(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& f : numbers_in(s)) out.push_back(f.spelling);
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("integers, decimals, leading and trailing dots") {
  CHECK(spellings("0 7 42 007 123456789") == V{"0", "7", "42", "007", "123456789"});
  CHECK(numbers_in("007")[0].value == 7.0);
  CHECK(spellings("pi is 3.14 and .5 is half") == V{"3.14", ".5"});
  CHECK(numbers_in(".5")[0].value == 0.5);
  CHECK(spellings("[5., 6.]") == V{"5.", "6."});
  CHECK(spellings("x = (5.)") == V{"5."});
  CHECK(spellings("I have 5.") == V{"5"});        // sentence full stop stays text
  CHECK(spellings("I have 5. Then") == V{"5"});
  CHECK(spellings("5.e3") == V{"5.e3"});
  CHECK(numbers_in("5.e3")[0].value == 5000.0);
  CHECK(spellings("1.5.") == V{"1.5"});
}

TEST_CASE("signs versus hyphens and operators") {
  CHECK(spellings("-5 +5 (-3) x=-4 [-.5]") == V{"-5", "+5", "-3", "-4", "-.5"});
  CHECK(numbers_in("-5")[0].value == -5.0);
  CHECK(numbers_in("+5")[0].value == 5.0);
  CHECK(numbers_in("-.5")[0].value == -0.5);
  CHECK(spellings("5-3") == V{"5", "3"});          // subtraction: both positive
  CHECK(numbers_in("5-3")[1].value == 3.0);
  CHECK(spellings("5 - 3") == V{"5", "3"});
  CHECK(spellings("5 -3") == V{"5", "-3"});
  CHECK(spellings("a-3") == V{"3"});               // hyphen after a word
  CHECK(spellings("COVID-19") == V{"19"});
  CHECK(spellings("f(x)-2") == V{"2"});            // after a closing bracket: operator
  CHECK(spellings("--3") == V{"3"});
}

TEST_CASE("scientific notation") {
  CHECK(spellings("6.02e23 1E-9 2.5e+3 -1.5E-07") == V{"6.02e23", "1E-9", "2.5e+3", "-1.5E-07"});
  CHECK(numbers_in("6.02e23")[0].value == 6.02e23);
  CHECK(numbers_in("1E-9")[0].value == 1e-9);
  CHECK(numbers_in("-1.5E-07")[0].value == -1.5e-7);
  CHECK(spellings("3e 5e- 3ex") == V{"3", "5", "3"});  // no exponent digits: the e is text
}

TEST_CASE("thousands separators versus lists") {
  CHECK(spellings("1,234,567") == V{"1,234,567"});
  CHECK(numbers_in("1,234,567")[0].value == 1234567.0);
  CHECK(numbers_in("12,345.67")[0].value == 12345.67);
  CHECK(spellings("1,2,3") == V{"1", "2", "3"});
  CHECK(spellings("1,2345") == V{"1", "2345"});
  CHECK(spellings("1,234,5") == V{"1", "234", "5"});
  CHECK(spellings("1234,567") == V{"1234", "567"});
  CHECK(spellings("1, 234") == V{"1", "234"});
}

TEST_CASE("percentages keep the percent sign as text") {
  CHECK(spellings("12.5% -3% 100%") == V{"12.5", "-3", "100"});
  CHECK(numbers_in("12.5%")[0].value == 12.5);
}

TEST_CASE("dates and times split into their numeric parts") {
  const auto d = numbers_in("2024-01-05");
  REQUIRE(d.size() == 3);
  CHECK(d[0].value == 2024.0);
  CHECK(d[1].spelling == "01");
  CHECK(d[1].value == 1.0);
  CHECK(d[2].value == 5.0);
  CHECK(spellings("12:30:45") == V{"12", "30", "45"});
  CHECK(spellings("05/01/2024") == V{"05", "01", "2024"});
}

TEST_CASE("numbers glued to words") {
  CHECK(spellings("3kg") == V{"3"});
  CHECK(spellings("5km/h 2nd") == V{"5", "2"});
  CHECK(spellings("x2 H2O abc123def v1.2.3 var_7").empty());
  CHECK(spellings("0x1F") == V{"0"});
  CHECK(spellings("有3个") == V{"3"});              // CJK is written without spaces
  CHECK(spellings("제3장") == V{"3"});
  CHECK(spellings("é5") == V{});                     // Latin letter glues
  CHECK(spellings("1.2.3 and 192.168.0.1").empty()); // dotted chains stay text
}

TEST_CASE("overflow stays text, underflow is zero, NaN and inf are words") {
  CHECK(spellings("1e400").empty());
  CHECK(spellings("-1e400 and 5").size() == 1);
  const auto u = numbers_in("1e-400");
  REQUIRE(u.size() == 1);
  CHECK(u[0].value == 0.0);
  CHECK(numbers_in("1.7976931348623157e308")[0].value == std::numeric_limits<double>::max());
  CHECK(spellings("NaN nan inf -inf Infinity").empty());
  for (const auto& f : numbers_in("4.9e-324 2.2250738585072014e-308")) CHECK(std::isfinite(f.value));
}

TEST_CASE("non-ASCII digits are not numbers") {
  CHECK(spellings("１２３ ٣٤٥ ² ½").empty());
}

TEST_CASE("parse_number_value is correctly rounded and rejects non-numbers") {
  CHECK(text::parse_number_value("0.1").value() == 0.1);
  CHECK(text::parse_number_value("1,000.25").value() == 1000.25);
  CHECK(text::parse_number_value("-0").value() == 0.0);
  CHECK_FALSE(text::parse_number_value("abc").has_value());
  CHECK_FALSE(text::parse_number_value("--1").has_value());
  CHECK_FALSE(text::parse_number_value("1e999").has_value());
}

TEST_CASE("format_number writes values that read back as one number") {
  CHECK(text::format_number(42.3) == "42.3");
  CHECK(text::format_number(42.0) == "42");
  CHECK(text::format_number(-0.0) == "0");
  CHECK(text::format_number(1234567.0) == "1234570");  // six significant digits
  CHECK(text::format_number(1234567.0, {7}) == "1234567");
  CHECK(text::format_number(0.000123456789) == "0.000123457");
  CHECK(text::format_number(6.02e23) == "6.02e23");
  CHECK(text::format_number(1.5e-7) == "1.5e-7");
  CHECK(text::format_number(-2.5e20) == "-2.5e20");
  CHECK(text::format_number(999999.7) == "1000000");
  CHECK(text::format_number(1.23456, {3}) == "1.23");
  CHECK(text::format_number(std::nan("")) == "nan");
  CHECK(text::format_number(-INFINITY) == "-inf");

  const unsigned seed = std::random_device{}();
  MESSAGE("format_number round trip seed = " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mantissa(-10.0, 10.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int k = 0; k < 2000; ++k) {
    const double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    const std::string s = text::format_number(v, {17});
    const auto found = text::find_numbers(" " + s + " ");
    INFO("seed " << seed << " value " << v << " written " << s);
    REQUIRE(found.size() == 1);
    CHECK(found[0].end - found[0].begin == s.size());
    CHECK(found[0].value == v);  // 17 significant digits round-trip exactly
  }
}
