// causalqwen: the command-line program. Subcommands live in cmd_*.cpp beside this file.
#include "command.hpp"
#include "numeric_options.hpp"
#include "omp_wait.hpp"

#include <causalqwen/linalg/bf16_gemm.hpp>
#include <causalqwen/dist/communicator.hpp>
#include <causalqwen/version.hpp>

#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string_view>

namespace {
/// Prints the error and returns the exit status 1. One of several processes (mpirun) says which
/// and ends them all: the others would wait forever in their next collective.
int fail(const std::exception& e) {
  if (const auto comm = causalqwen::dist::Communicator::world(); comm.size() > 1) {
    fmt::print(stderr, "causalqwen: error ({}): {}\n", comm.where(), e.what());
    std::fflush(stderr);
    comm.abort(1);
  }
  fmt::print(stderr, "causalqwen: error: {}\n", e.what());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  // idle OpenMP threads must not spin while OpenBLAS works: PASSIVE unless the user chose
  cqcli::restart_with_passive_omp_wait(argv);
  // started by mpirun: MPI for the whole run (train splits its work over the processes)
  std::optional<causalqwen::dist::Session> mpi;
  try {
    mpi.emplace(&argc, &argv, causalqwen::dist::started_by_mpirun(environ));
    // CAUSALQWEN_BF16_KERNEL=auto|onednn|own|avx2|portable forces the bf16 products' kernels
    // (linalg::set_bf16_kernel), for comparisons; unset: auto
    if (const char* kernel = std::getenv("CAUSALQWEN_BF16_KERNEL"); kernel != nullptr && *kernel != '\0')
      causalqwen::linalg::set_bf16_kernel(causalqwen::linalg::parse_bf16_kernel(kernel));
  } catch (const std::exception& e) {
    return fail(e);
  }
  CLI::App app{"causalqwen: a Qwen2 language model whose heads carry Cauchy distributions",
               "causalqwen"};
  app.set_version_flag("--version", std::string(causalqwen::version_string));
  app.require_subcommand(1);

  auto& table = cqcli::command_table();
  std::sort(table.begin(), table.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& entry : table) entry.install(app);

  // hidden: every numeric option of every subcommand with its range, for the test that walks them
  if (argc == 2 && std::string_view(argv[1]) == "--list-numeric-options") {
    cqcli::print_numeric_options(stdout);
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 as CLI11 prints them; a bad command line is one line and
    // exit status 2 (CLI11's own codes, 105 and so on, are not the shell's convention)
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "causalqwen: error: {} (see --help)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    return fail(e);
  }
  return 0;
}
