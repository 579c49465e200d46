// Every benchmark runs under the thread settings the library's programs use, and says so.
#pragma once
#include "omp_wait.hpp"  // the causalqwen program's

#include <fmt/core.h>

#include <cstdlib>

namespace cqbench {

/// Restarts the program with OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT=10000 where the user set
/// neither (cqcli::restart_with_passive_omp_wait: idle threads spin about 0.1 ms, then
/// sleep), then prints the settings in force. Peers started as child processes (PyTorch)
/// inherit them; PyTorch's training step was 1.1x faster with the short spin than with PASSIVE
/// alone here, and about 2.5x faster than with libgomp's default spinning.
inline void use_library_thread_settings(char** argv) {
  cqcli::restart_with_passive_omp_wait(argv);
  const auto value = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "(unset)";
  };
  fmt::print("thread settings (ours and the peers' child processes): OMP_WAIT_POLICY={} GOMP_SPINCOUNT={} "
             "OPENBLAS_CORETYPE={}\n",
             value("OMP_WAIT_POLICY"), value("GOMP_SPINCOUNT"), value("OPENBLAS_CORETYPE"));
}

}  // namespace cqbench
