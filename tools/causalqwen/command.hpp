// The causalqwen program's command table: each cmd_*.cpp file in this folder adds one
// subcommand to the CLI11 application by registering a function at static-initialisation time.
//
//   static const cqcli::Registration reg{"tokenize", [](CLI::App& app) { ... }};
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cqcli {

struct CommandEntry {
  std::string name;                       // subcommand name, for ordering only
  std::function<void(CLI::App&)> install; // adds the subcommand and its callback to the app
};

inline std::vector<CommandEntry>& command_table() {
  static std::vector<CommandEntry> table;
  return table;
}

struct Registration {
  Registration(std::string name, std::function<void(CLI::App&)> install) {
    command_table().push_back({std::move(name), std::move(install)});
  }
};

}  // namespace cqcli
