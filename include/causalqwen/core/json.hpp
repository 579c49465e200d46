/// The one door through which the library reads JSON (tokenizer.json, config.json, batch JSON,
/// JSONL lines, trainer_state.json): every error of the JSON library (malformed text, a number
/// beyond the double range such as 1e400, a value of the wrong type) leaves as a FormatError
/// naming the source (a file, or "file:line" for JSONL), the field path and what was expected.
///
///   parse(text, source)           text → JSON, or FormatError "<source>: not valid JSON (…)"
///   read_file_text(path)          a whole JSON file's text (refused when unreadable or past 256 MiB)
///   parse_file(path)              the same, parsed
///   guarded(source, read)         runs read(); a JSON library exception escaping it becomes
///                                 FormatError "<source>: <its message>"
///   field<T>(object, key, …)      a present field of type T, else FormatError naming the path
///   field_or<T>(object, key, fallback, …)   the same; `fallback` when absent or null
#pragma once
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace causalqwen::json {

using Json = nlohmann::json;

/// FormatError("<source>: <path> must be <expected>, got <value>") (the value cut to 80 bytes).
inline FormatError field_error(std::string_view source, std::string_view path, std::string_view expected,
                               const Json& got) {
  std::string shown = got.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  return FormatError(fmt::format("{}: {} must be {}, got {}", source, path, expected, shown));
}

/// `text` fit for a terminal: control bytes and bytes that are not part of valid UTF-8 written as
/// \xHH (the JSON library's messages quote the bytes they stopped at, whatever they are).
inline std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    // the length of a valid UTF-8 sequence starting here (0: not one)
    std::size_t n = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
    if (n > 1) {
      if (i + n > text.size()) n = 0;
      for (std::size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) n = 0;
      if (n == 3) {  // no overlong forms, no surrogates
        const auto c1 = static_cast<unsigned char>(text[i + 1]);
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0)) n = 0;
      } else if (n == 4) {
        const auto c1 = static_cast<unsigned char>(text[i + 1]);
        if ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90)) n = 0;
      }
    }
    if (n == 1 && c >= 0x20 && c != 0x7f) out += static_cast<char>(c);
    else if (n > 1) out.append(text.substr(i, n));
    else out += fmt::format("\\x{:02x}", c);
    i += n ? n : 1;
  }
  return out;
}

/// `text` parsed; FormatError naming `source` on any JSON library error (including numbers
/// beyond the double range, which the JSON library refuses while parsing), its bytes escaped.
inline Json parse(std::string_view text, std::string_view source) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw FormatError(fmt::format("{}: not valid JSON ({})", source, escaped(e.what())));
  }
}

/// The largest JSON file parse_file reads: 256 MiB (a Qwen2 tokenizer.json is about 7 MiB).
inline constexpr std::size_t max_json_file_bytes = std::size_t{256} << 20;

/// The text of the JSON file at `path`; FormatError "<path>: cannot open the <what>" when it
/// cannot be opened, "<path>: read error" when a read fails (a directory, EIO), and "holds more
/// than 256 MiB" past max_json_file_bytes (/dev/zero is refused after that many bytes, not read on).
inline std::string read_file_text(const std::filesystem::path& path, std::string_view what = "file") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(fmt::format("{}: cannot open the {}", path.string(), what));
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_json_file_bytes)
      throw FormatError(fmt::format("{}: holds more than {} MiB, the limit of a JSON file", path.string(),
                                    max_json_file_bytes >> 20));
  }
  if (in.bad()) throw FormatError(fmt::format("{}: read error", path.string()));
  return text;
}

/// The file at `path` parsed (see parse() and read_file_text()).
inline Json parse_file(const std::filesystem::path& path) {
  return parse(read_file_text(path), path.string());
}

/// read(), with any JSON library exception escaping it turned into FormatError naming `source`.
/// The safety net behind field()/field_or(): a reader that checks every field itself never
/// reaches it.
template <class Read>
decltype(auto) guarded(std::string_view source, Read&& read) {
  try {
    return read();
  } catch (const Json::exception& e) {
    throw FormatError(fmt::format("{}: unexpected JSON value ({})", source, e.what()));
  }
}

/// What field() expects of a value of type T, in words.
template <class T>
std::string expected_of() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_integral_v<T>)
    return fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  else return "a JSON value";
}

/// `value` as T when it holds one exactly (booleans, strings, finite numbers, integers that T
/// holds without wrapping); FormatError "<source>: <path> must be <what T holds>, got …" else.
template <class T>
T as(const Json& value, std::string_view source, std::string_view path) {
  if constexpr (std::is_same_v<T, bool>) {
    if (value.is_boolean()) return value.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (value.is_string()) return value.get<std::string>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (value.is_number()) return static_cast<T>(value.get<double>());
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
    } else if (value.is_number_integer()) {
      const auto v = value.get<std::int64_t>();
      if constexpr (std::is_signed_v<T>) {
        if (v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
            v <= static_cast<std::int64_t>(std::numeric_limits<T>::max()))
          return static_cast<T>(v);
      } else {
        if (v >= 0 && static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
          return static_cast<T>(v);
      }
    }
  } else {
    static_assert(std::is_same_v<T, Json>, "json::as<T>: T must be bool, a string, a number or Json");
    return value;
  }
  throw field_error(source, path, expected_of<T>(), value);
}

/// object[key] as T (see as()); FormatError naming "<path>.<key>" when absent or of another
/// type. `path` is where `object` sits ("" at the top level).
template <class T>
T field(const Json& object, std::string_view key, std::string_view source, std::string_view path = "") {
  const std::string where = path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  if (!object.is_object() || !object.contains(key))
    throw FormatError(fmt::format("{}: {} is missing ({} was expected)", source, where, expected_of<T>()));
  return as<T>(object[std::string(key)], source, where);
}

/// object[key] as T, or `fallback` when `object` has no such key or holds null there.
template <class T>
T field_or(const Json& object, std::string_view key, T fallback, std::string_view source,
           std::string_view path = "") {
  if (!object.is_object() || !object.contains(key) || object[std::string(key)].is_null()) return fallback;
  return as<T>(object[std::string(key)], source, path.empty() ? std::string(key) : fmt::format("{}.{}", path, key));
}

}  // namespace causalqwen::json
