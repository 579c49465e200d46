#!/usr/bin/env bash
# The library's linear products at two versions of its headers, in one process: BEFORE (a git
# revision of this repository) against the work tree's include/, each call of one followed by
# the same call of the other (benchmarks/gemm_ab_main.cpp), on the demo's shapes or the
# Qwen2.5-0.5B shapes, in float or in bf16 (mixed precision's products). The older headers are
# compiled with their namespace renamed, so both versions live in one program (built in a
# temporary directory, removed at the end). Prints per shape both medians and the median ratio
# before/after (> 1: faster now).
#
#   bash benchmarks/gemm_ab.sh BEFORE [demo|qwen0.5b] [f32|bf16]
#   e.g.  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE bash benchmarks/gemm_ab.sh HEAD~1 demo
# Compiled as the project compiles its own programs (-O3 -march=native, no -ffast-math); needs
# the libraries of the build (Eigen, OpenBLAS, fmt, OpenMP).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bash benchmarks/gemm_ab.sh BEFORE [demo|qwen0.5b] [f32|bf16]   (BEFORE: a git revision)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
before=$1
shift
case "${1:-demo}" in demo | qwen0.5b) ;; *) echo "gemm_ab.sh: unknown shapes '$1' (expected demo or qwen0.5b)" >&2; exit 2 ;; esac
case "${2:-f32}" in f32 | bf16) ;; *) echo "gemm_ab.sh: unknown precision '$2' (expected f32 or bf16)" >&2; exit 2 ;; esac
git -C "$root" rev-parse --verify --quiet "$before^{commit}" >/dev/null || {
  echo "gemm_ab.sh: '$before' is not a revision of $root" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/before"
git -C "$root" archive "$before" include | tar -x -C "$work/before"
flags=(-O3 -DNDEBUG -march=native -fopenmp -fno-math-errno -std=gnu++20 -isystem /usr/include/eigen3 -DEIGEN_USE_BLAS
       -I/usr/include/x86_64-linux-gnu/openblas-openmp)
echo "compiling the products at $before and at the work tree..." >&2
c++ "${flags[@]}" -Dcausalqwen=causalqwen_before -DGEMM_AB_NAME=gemm_before -I"$work/before/include" \
  -c "$root/benchmarks/gemm_ab_products.cpp" -o "$work/before.o" &
c++ "${flags[@]}" -DGEMM_AB_NAME=gemm_after -I"$root/include" -c "$root/benchmarks/gemm_ab_products.cpp" -o "$work/after.o"
wait
blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
c++ "${flags[@]}" "$root/benchmarks/gemm_ab_main.cpp" "$work/before.o" "$work/after.o" -o "$work/gemm_ab" \
  -Wl,-rpath,"$blas" "$blas/libopenblas.so.0" -lfmt
echo "before: $before ($(git -C "$root" rev-parse --short "$before")), after: the work tree; OMP_NUM_THREADS=${OMP_NUM_THREADS:-(unset)}" >&2
"$work/gemm_ab" "$@"
