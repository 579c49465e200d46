#!/usr/bin/env bash
# Installs, with apt-get, whatever of causalqwen's Debian packages is missing; does nothing
# (and needs no network) when everything is present. Idempotent.
#   bash cmake/install-deps.sh            build + demo
#   bash cmake/install-deps.sh --tests    also what the test suite and benchmarks use
set -euo pipefail
pkgs=(g++ make cmake libeigen3-dev libxtensor-dev xtensor-dev libxsimd-dev libfmt-dev
      nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libopenblas-dev libopenblas0-openmp
      libdnnl-dev libopenmpi-dev openmpi-bin pkg-config libcpp-httplib-dev)
if [[ "${1:-}" == "--tests" ]]; then
  # clang, libclang-rt-dev (libFuzzer and the sanitizer runtimes) and libomp-dev (OpenMP under
  # Clang): the fuzz targets' build, preset `fuzz`; chromium: the server's page in a real browser;
  # time: GNU time, the maximum RSS of each case in cli_numeric_options
  pkgs+=(doctest-dev libbenchmark-dev libboost-math-dev python3-torch clang libclang-rt-dev libomp-dev ccache chromium time)
  command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#pkgs[@]} packages present"
fi
