#!/usr/bin/env bash
# The library's linear products at two versions of its headers, in one process: BEFORE (a git
# revision of this repository) against the work tree's include/, a few calls of one followed by
# as many of the other, over and over (benchmarks/kernels/gemm_ab_main.cpp), on the demo's shapes
# or the Qwen2.5-0.5B shapes, in float or in bf16 (mixed precision's products). The older headers are
# compiled with their namespace renamed, so both versions live in one program (built in a
# temporary directory, removed at the end). Prints per shape both medians and the median ratio
# before/after (> 1: faster now).
#
#   bash benchmarks/kernels/gemm_ab.sh BEFORE [demo|qwen0.5b] [f32|bf16]
#   e.g.  OMP_NUM_THREADS=2 bash benchmarks/kernels/gemm_ab.sh HEAD~1 demo
# Compiled as the project compiles its own programs (-O3 -march=native, no -ffast-math); needs
# the libraries of the build (Eigen, OpenBLAS, fmt, OpenMP).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bash benchmarks/kernels/gemm_ab.sh BEFORE [demo|qwen0.5b] [f32|bf16]   (BEFORE: a git revision)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
before=$1
shift
case "${1:-demo}" in demo | qwen0.5b) ;; *) echo "gemm_ab.sh: unknown shapes '$1' (expected demo or qwen0.5b)" >&2; exit 2 ;; esac
case "${2:-f32}" in f32 | bf16) ;; *) echo "gemm_ab.sh: unknown precision '$2' (expected f32 or bf16)" >&2; exit 2 ;; esac
git -C "$root" rev-parse --verify --quiet "$before^{commit}" >/dev/null || {
  echo "gemm_ab.sh: '$before' is not a revision of $root" >&2
  exit 2
}
# The thread settings of the library's programs (restart_with_passive_omp_wait): PASSIVE when no
# policy is set, and then a short spin before an idle thread sleeps. Without the spin every
# barrier inside a product costs a futex wake-up, which weighs on short products and changes
# which of two versions looks faster.
if [ -z "${OMP_WAIT_POLICY:-}" ]; then export OMP_WAIT_POLICY=PASSIVE; fi
if [ "$(echo "$OMP_WAIT_POLICY" | tr '[:lower:]' '[:upper:]')" = PASSIVE ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then
  export GOMP_SPINCOUNT=10000
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/before"
git -C "$root" archive "$before" include | tar -x -C "$work/before"
flags=(-O3 -DNDEBUG -march=native -fopenmp -fno-math-errno -std=gnu++20 -isystem /usr/include/eigen3 -DEIGEN_USE_BLAS
       -I/usr/include/x86_64-linux-gnu/openblas-openmp)
echo "compiling the products at $before and at the work tree..." >&2
c++ "${flags[@]}" -Dcausalqwen=causalqwen_before -DGEMM_AB_NAME=gemm_before -I"$work/before/include" \
  -c "$root/benchmarks/kernels/gemm_ab_products.cpp" -o "$work/before.o" &
c++ "${flags[@]}" -DGEMM_AB_NAME=gemm_after -I"$root/include" -c "$root/benchmarks/kernels/gemm_ab_products.cpp" -o "$work/after.o"
wait
blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
c++ "${flags[@]}" "$root/benchmarks/kernels/gemm_ab_main.cpp" "$work/before.o" "$work/after.o" -o "$work/gemm_ab" \
  -Wl,-rpath,"$blas" "$blas/libopenblas.so.0" -lfmt
echo "before: $before ($(git -C "$root" rev-parse --short "$before")), after: the work tree; OMP_NUM_THREADS=${OMP_NUM_THREADS:-(unset)} OMP_WAIT_POLICY=$OMP_WAIT_POLICY GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-(unset)}" >&2
"$work/gemm_ab" "$@"
