// Runs cqcli::restart_with_passive_omp_wait (the programs' omp_wait.hpp) first thing in main, as they do,
// then prints the settings it runs under and how many times it was started (a variable set before
// the call survives the restart). tests/cli/CMakeLists.txt checks the line for each starting
// environment.
#include "omp_wait.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int, char** argv) {
  const char* started = std::getenv("CQ_PROBE_STARTS");
  const int starts = (started != nullptr ? std::atoi(started) : 0) + 1;
  ::setenv("CQ_PROBE_STARTS", std::to_string(starts).c_str(), 1);
  cqcli::restart_with_passive_omp_wait(argv);
  const auto value = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "(unset)";
  };
  std::printf("OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s starts=%d\n", value("OMP_WAIT_POLICY"), value("GOMP_SPINCOUNT"),
              starts);
  return 0;
}
