/// Checking a file's (or checkpoint's) tensors against the list a model expects, reporting
/// every missing, extra and wrongly-shaped tensor in one message.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/format/safetensors.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::format {

/// A tensor a model expects: its name and shape.
struct ExpectedTensor {
  std::string name;
  std::vector<std::size_t> shape;
};

/// Whether tensors in the file that the model does not expect are an error.
enum class ExtraTensors { error, ignore };

/// Anything with `names()`, `contains(name)` and `info(name)`: SafetensorsFile,
/// SafetensorsCheckpoint.
template <class S>
concept TensorSource = requires(const S& s, const std::string& name) {
  { s.names() } -> std::convertible_to<std::vector<std::string>>;
  { s.contains(name) } -> std::convertible_to<bool>;
  { s.info(name) } -> std::convertible_to<const TensorInfo&>;
};

/// Throws one FormatError listing, for `where` (a file or directory name), every expected tensor
/// that is missing, every tensor of a wrong shape ("'x' has shape [..], expected [..]") and,
/// with ExtraTensors::error, every tensor nobody expects. Does nothing when all agree.
template <TensorSource Source>
void check_expected(const Source& source, std::span<const ExpectedTensor> expected,
                    const std::string& where, ExtraTensors extra = ExtraTensors::error) {
  std::vector<std::string> missing, wrong_shape, unexpected;
  std::set<std::string> expected_names;
  for (const auto& e : expected) {
    expected_names.insert(e.name);
    if (!source.contains(e.name)) {
      missing.push_back(fmt::format("'{}' {}", e.name, shape_text(e.shape)));
      continue;
    }
    const auto& shape = source.info(e.name).shape;
    if (shape != e.shape)
      wrong_shape.push_back(fmt::format("'{}' has shape {}, expected {}", e.name,
                                        shape_text(shape), shape_text(e.shape)));
  }
  if (extra == ExtraTensors::error)
    for (const auto& name : source.names())
      if (!expected_names.contains(name)) unexpected.push_back(fmt::format("'{}'", name));
  if (missing.empty() && wrong_shape.empty() && unexpected.empty()) return;
  std::string message = where + ": tensors do not match the model:";
  if (!missing.empty())
    message += fmt::format(" missing {} ({});", missing.size(), fmt::join(missing, ", "));
  if (!wrong_shape.empty())
    message += fmt::format(" wrong shape {} ({});", wrong_shape.size(),
                           fmt::join(wrong_shape, ", "));
  if (!unexpected.empty())
    message += fmt::format(" unexpected {} ({});", unexpected.size(), fmt::join(unexpected, ", "));
  message.pop_back();
  throw FormatError(message);
}

/// check_expected with the source's own path (a file) or directory (a checkpoint) as `where`.
template <TensorSource Source>
void check_expected(const Source& source, std::span<const ExpectedTensor> expected,
                    ExtraTensors extra = ExtraTensors::error) {
  if constexpr (requires { source.directory(); })
    check_expected(source, expected, source.directory().string(), extra);
  else
    check_expected(source, expected, source.path().string(), extra);
}

}  // namespace causalqwen::format
