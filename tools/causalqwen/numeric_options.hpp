// The causalqwen program's numeric options, one validation for all: every integer option is read
// as a signed 64-bit integer (so -1 is refused, never wrapped to 2^64 - 1) and must lie in its
// range; every real option must be a finite number in its range (NaN, infinities and values past
// the double range are refused); the range is written into the option's --help in readable form
// ("[1, 2^20]", "(0, inf)"). A value outside is one line and exit status 2, naming the option
// as typed (an option of several names is one CLI11 option per name):
//   causalqwen: error: --steps -1: expected an integer in [1, 10^9] (see --help)
// Each option is also listed in numeric_option_table(), which `causalqwen --list-numeric-options`
// prints (subcommand, option, kind, range) for the test that walks every numeric option.
//
//   cqcli::add_integer(sub, "--steps", a->steps, {1, 1'000'000'000}, "Optimiser steps");
//   cqcli::add_real(sub, "--lr", a->lr, cqcli::RealRange::positive(), "Peak learning rate");
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace cqcli {

/// Ranges shared by several subcommands. Seeds: any non-negative 64-bit signed integer. Steps and
/// counts of sentences: up to 10^9. Threads: up to 1024. Sequences per batch: up to 2^20; tokens
/// per sequence: up to 2^24 (the largest position id a batch may hold). Products of these are
/// checked against memory by the library before anything is allocated.
inline constexpr std::int64_t max_seed = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t max_steps = 1'000'000'000;
inline constexpr std::int64_t max_count = 1'000'000'000;
inline constexpr std::int64_t max_threads = 1024;
inline constexpr std::int64_t max_batch = std::int64_t{1} << 20;
inline constexpr std::int64_t max_seq = std::int64_t{1} << 24;

/// An integer option's closed range [min, max]; `above` replaces "expected an integer in …"
/// for a value above max (e.g. "MiB does not fit in a byte count").
struct IntRange {
  std::int64_t min = 0, max = std::numeric_limits<std::int64_t>::max();
  std::string above = {};
};

/// A real option's range: min and max (±inf: unbounded on that side), each end open or closed.
struct RealRange {
  double min = -HUGE_VAL, max = HUGE_VAL;
  bool min_open = false, max_open = false;

  static RealRange any() { return {}; }
  static RealRange non_negative() { return {0.0, HUGE_VAL, false, true}; }
  static RealRange positive() { return {0.0, HUGE_VAL, true, true}; }
  static RealRange closed(double lo, double hi) { return {lo, hi, false, false}; }
  static RealRange half_open(double lo, double hi) { return {lo, hi, false, true}; }  // [lo, hi)
  static RealRange open(double lo, double hi) { return {lo, hi, true, true}; }

  bool contains(double v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
};

/// One numeric option as --list-numeric-options prints it.
struct NumericOptionInfo {
  std::string command, option, kind;  // kind: "int" or "real"
  std::string low, high;              // the range's ends as numbers ("-inf", "inf" for unbounded)
  bool low_open = false, high_open = false;
};

inline std::vector<NumericOptionInfo>& numeric_option_table() {
  static std::vector<NumericOptionInfo> table;
  return table;
}

namespace detail_numeric {

/// An integer in readable form: as is below 10^6, else 2^k, 2^k − 1, 10^k or its digits.
inline std::string readable_int(std::int64_t v) {
  if (v == std::numeric_limits<std::int64_t>::max()) return "2^63-1";
  if (v == std::numeric_limits<std::int64_t>::min()) return "-2^63";
  const std::uint64_t a = v < 0 ? std::uint64_t(-(v + 1)) + 1 : std::uint64_t(v);
  const std::string sign = v < 0 ? "-" : "";
  if (a < 1'000'000) return std::to_string(v);
  if ((a & (a - 1)) == 0) return fmt::format("{}2^{}", sign, __builtin_ctzll(a));
  if (((a + 1) & a) == 0) return fmt::format("{}2^{}-1", sign, __builtin_ctzll(a + 1));
  std::uint64_t p = 1;
  int k = 0;
  while (p < a && p <= std::numeric_limits<std::uint64_t>::max() / 10) p *= 10, ++k;
  if (p == a) return fmt::format("{}10^{}", sign, k);
  return std::to_string(v);
}

/// A real range end: shortest round-trip form, "inf" for an unbounded end.
inline std::string readable_real(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

inline std::string range_text(const IntRange& r) {
  return fmt::format("[{}, {}]", readable_int(r.min), readable_int(r.max));
}

inline std::string range_text(const RealRange& r) {
  return fmt::format("{}{}, {}{}", r.min_open || std::isinf(r.min) ? "(" : "[", readable_real(r.min),
                     readable_real(r.max), r.max_open || std::isinf(r.max) ? ")" : "]");
}

/// At most 40 characters of what the user typed, other bytes than printable ASCII as \xHH.
inline std::string shown(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  }
  if (text.size() > 40) out += "...";
  return out;
}

/// The integer `text` (decimal, an optional sign) within `range`; CLI::ValidationError otherwise.
inline std::int64_t parse_integer(const std::string& name, const std::string& text, const IntRange& range) {
  const auto refuse = [&](const std::string& why) {
    return CLI::ValidationError(fmt::format("{} {}: {}", name, shown(text), why));
  };
  const std::string expected = "expected an integer in " + range_text(range);
  std::size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) i = 1;
  if (i == text.size()) throw refuse(expected);
  // the magnitude, saturated: anything past 2^63 is simply out of every range
  std::uint64_t magnitude = 0;
  bool huge = false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') throw refuse(expected);
    const std::uint64_t digit = std::uint64_t(text[i] - '0');
    if (magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) huge = true;
    else magnitude = magnitude * 10 + digit;
  }
  const std::uint64_t limit = negative ? std::uint64_t(1) << 63 : (std::uint64_t(1) << 63) - 1;
  const auto refuse_above = [&] {
    return CLI::ValidationError(fmt::format("{} {} {}; {}", name, shown(text), range.above, expected));
  };
  if (huge || magnitude > limit) {
    if (!negative && !range.above.empty()) throw refuse_above();
    throw refuse(expected);
  }
  const std::int64_t value = negative ? (magnitude == (std::uint64_t(1) << 63) ? std::numeric_limits<std::int64_t>::min()
                                                                             : -std::int64_t(magnitude))
                                      : std::int64_t(magnitude);
  if (value > range.max && !range.above.empty()) throw refuse_above();
  if (value < range.min || value > range.max) throw refuse(expected);
  return value;
}

/// The real number `text` within `range`: finite, and the whole text one number.
inline double parse_real(const std::string& name, const std::string& text, const RealRange& range) {
  const std::string expected = "expected a finite number in " + range_text(range);
  const auto refuse = [&](const std::string& why) {
    return CLI::ValidationError(fmt::format("{} {}: {}", name, shown(text), why));
  };
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) throw refuse(expected);
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) throw refuse(expected);
  if (!std::isfinite(value)) throw refuse(expected);
  if (errno == ERANGE && std::fabs(value) > 1.0) throw refuse(expected);  // past the double range
  if (!range.contains(value)) throw refuse(expected);
  return value == 0.0 ? 0.0 : value;  // -0 as 0
}

inline void list(CLI::App* sub, const CLI::Option* opt, std::string kind, std::string low, std::string high,
                 bool low_open, bool high_open) {
  numeric_option_table().push_back({sub->get_name(), opt->get_name(), std::move(kind), std::move(low),
                                    std::move(high), low_open, high_open});
}

inline std::string help_with_range(const std::string& help, const std::string& range) {
  return help.empty() ? "in " + range : help + "; in " + range;
}

template <class V>
std::string default_text(const V& v) {
  if constexpr (std::is_floating_point_v<V>) return fmt::format("{}", v);
  else return std::to_string(v);
}

}  // namespace detail_numeric

namespace detail_numeric {

/// The names of `flags` ("--alpha-start,--alpha" → "--alpha-start", "--alpha").
inline std::vector<std::string> flag_names(const std::string& flags) {
  std::vector<std::string> names;
  for (std::size_t from = 0; from <= flags.size();) {
    const std::size_t comma = std::min(flags.find(',', from), flags.size());
    if (comma > from) names.push_back(flags.substr(from, comma - from));
    from = comma + 1;
  }
  return names;
}

/// Adds one option per name of `flags`, so that a refusal names the one the user typed: the
/// first with `help`, each other one "the same as <first>" (the two exclude each other). Each
/// is listed in numeric_option_table() and writes `range` into its help; set(name, value)
/// parses and stores a value given under `name`. Returns the first.
template <class Arg, class Set, class List>
CLI::Option* add_each_name(CLI::App* sub, const std::string& flags, const std::string& help, const std::string& range,
                           const std::string& type, const Set& set, const List& list) {
  CLI::Option* first = nullptr;
  const auto names = flag_names(flags);
  for (const auto& name : names) {
    auto* opt = sub->add_option_function<Arg>(
        name, [set, name](const Arg& value) { set(name, value); },
        help_with_range(first ? "the same as " + names.front() : help, range));
    opt->type_name(type);
    list(opt);
    if (first) first->excludes(opt);
    else first = opt;
  }
  return first;
}

}  // namespace detail_numeric

/// An integer option into `target` (any integer type whose values hold `range`), its range
/// checked and written into its help, its current value shown as the default when `show_default`.
/// Several names ("--a,--b") are one option each, so that a refusal names the one typed.
template <std::integral Int>
CLI::Option* add_integer(CLI::App* sub, const std::string& flags, Int& target, IntRange range, const std::string& help,
                         bool show_default = true) {
  if (range.min < std::int64_t(std::numeric_limits<Int>::min())) range.min = std::int64_t(std::numeric_limits<Int>::min());
  if (std::uint64_t(range.max) > std::uint64_t(std::numeric_limits<Int>::max()))
    range.max = std::int64_t(std::numeric_limits<Int>::max());
  auto* opt = detail_numeric::add_each_name<std::string>(
      sub, flags, help, detail_numeric::range_text(range), "INT",
      [&target, range](const std::string& name, const std::string& text) {
        target = static_cast<Int>(detail_numeric::parse_integer(name, text, range));
      },
      [&](const CLI::Option* o) {
        detail_numeric::list(sub, o, "int", std::to_string(range.min), std::to_string(range.max), false, false);
      });
  if (show_default) opt->default_str(detail_numeric::default_text(target));
  return opt;
}

/// std::optional<Int> target: set when the option is given.
template <std::integral Int>
CLI::Option* add_integer(CLI::App* sub, const std::string& flags, std::optional<Int>& target, IntRange range,
                         const std::string& help) {
  return detail_numeric::add_each_name<std::string>(
      sub, flags, help, detail_numeric::range_text(range), "INT",
      [&target, range](const std::string& name, const std::string& text) {
        target = static_cast<Int>(detail_numeric::parse_integer(name, text, range));
      },
      [&](const CLI::Option* o) {
        detail_numeric::list(sub, o, "int", std::to_string(range.min), std::to_string(range.max), false, false);
      });
}

namespace detail_numeric {
inline void list_real(CLI::App* sub, const CLI::Option* opt, const RealRange& r) {
  list(sub, opt, "real", readable_real(r.min), readable_real(r.max), r.min_open, r.max_open);
}
}  // namespace detail_numeric

/// A real option into `target` (double or float), finite and within `range`.
template <std::floating_point Real>
CLI::Option* add_real(CLI::App* sub, const std::string& flags, Real& target, RealRange range, const std::string& help,
                      bool show_default = true) {
  auto* opt = detail_numeric::add_each_name<std::string>(
      sub, flags, help, detail_numeric::range_text(range), "FLOAT",
      [&target, range](const std::string& name, const std::string& text) {
        target = static_cast<Real>(detail_numeric::parse_real(name, text, range));
      },
      [&](const CLI::Option* o) { detail_numeric::list_real(sub, o, range); });
  if (show_default) opt->default_str(detail_numeric::default_text(target));
  return opt;
}

/// std::optional<double> target: set when the option is given.
inline CLI::Option* add_real(CLI::App* sub, const std::string& flags, std::optional<double>& target, RealRange range,
                             const std::string& help) {
  return detail_numeric::add_each_name<std::string>(
      sub, flags, help, detail_numeric::range_text(range), "FLOAT",
      [&target, range](const std::string& name, const std::string& text) {
        target = detail_numeric::parse_real(name, text, range);
      },
      [&](const CLI::Option* o) { detail_numeric::list_real(sub, o, range); });
}

/// One or more reals (repeatable, or several after the flag), each finite and within `range`.
inline CLI::Option* add_reals(CLI::App* sub, const std::string& flags, std::vector<double>& target, RealRange range,
                              const std::string& help) {
  return detail_numeric::add_each_name<std::vector<std::string>>(
      sub, flags, help, detail_numeric::range_text(range) + " each", "FLOAT",
      [&target, range](const std::string& name, const std::vector<std::string>& texts) {
        target.clear();
        for (const auto& text : texts) target.push_back(detail_numeric::parse_real(name, text, range));
      },
      [&](const CLI::Option* o) { detail_numeric::list_real(sub, o, range); });
}

/// Prints the table, one option a line: "<command> <option> <int|real> <low> <high> <[|(><]|)>".
inline void print_numeric_options(std::FILE* out) {
  for (const auto& o : numeric_option_table())
    fmt::print(out, "{} {} {} {} {} {}{}\n", o.command, o.option, o.kind, o.low, o.high, o.low_open ? "(" : "[",
               o.high_open ? ")" : "]");
}

}  // namespace cqcli
