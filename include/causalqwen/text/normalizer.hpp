/// Unicode normalisation for the tokenizer's "NFC" normalizer, through utf8proc.
#pragma once
#include <causalqwen/core/error.hpp>

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace causalqwen::text {

/// True when every byte of `s` is ASCII (ASCII text is its own NFC form).
inline bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

/// NFC(s): canonical decomposition followed by canonical composition (UAX #15), keeping
/// unassigned code points (UTF8PROC_STABLE). Precondition: s is well-formed UTF-8.
inline std::string nfc(std::string_view s) {
  if (is_ascii(s)) return std::string(s);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
      &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0)
    throw DomainError(std::string("causalqwen::text::nfc: utf8proc failed: ") +
                      utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(mapped, &std::free);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n));
}

}  // namespace causalqwen::text
