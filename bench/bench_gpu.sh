#!/usr/bin/env bash
# GPU default schedules against PyTorch's kernels (cuBLAS, cuDNN) on the CUDA device, in the
# same run: bench_gpu times Tessel's kernels, bench/gpu_peers.py the same cases through torch
# (which must be importable by python3; it is not installed here) and prints the ratios.
#   bash bench/bench_gpu.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp)
"$build/bench/bench_gpu" pocl=0 | tee "$out"
python3 "$root/bench/gpu_peers.py" "$out"
rm -f "$out"
