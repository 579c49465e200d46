/// Errors thrown by checked entry points. Every message names the function (or file) and the
/// argument (or field) at fault and what was expected, e.g.
///   "causalqwen::cdf: scale must be > 0, got -1".
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace causalqwen {

/// An argument outside a function's domain (scale <= 0, p outside (0,1), shapes that disagree).
class DomainError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A file that cannot be read as what it claims to be (checkpoints, tokenizers, configs).
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Throws DomainError("causalqwen::<fn>: <what>") when `ok` is false.
template <class... Args>
inline void require(bool ok, const char* fn, fmt::format_string<Args...> what, Args&&... args) {
  if (!ok) [[unlikely]]
    throw DomainError(std::string("causalqwen::") + fn + ": " +
                      fmt::format(what, std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace causalqwen
