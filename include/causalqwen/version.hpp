/// causalqwen version (kept in step with CMakeLists.txt's project(VERSION)).
#pragma once
#include <string_view>

namespace causalqwen {
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
inline constexpr std::string_view version_string = "0.1.0";
}  // namespace causalqwen

namespace cq = causalqwen;
