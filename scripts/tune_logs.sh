#!/usr/bin/env bash
# Regenerates the tuning logs in tuning_logs/ on this machine (about 45 minutes on 2 cores).
# Run nothing else meanwhile: measurements share the two cores.
# With --resume an interrupted run continues where it stopped (the budgets are totals).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/tune --op matmul --shape M=1024,N=1024,K=1024 --trials 320 --log tuning_logs/gemm_1024.json --resume
./build/tune --op matmul --shape M=512,N=512,K=512 --trials 216 --log tuning_logs/gemm_512.json --resume
./build/tune --op matmul --shape M=2048,N=2048,K=2048 --trials 216 --log tuning_logs/gemm_2048.json --resume
./build/tune --workloads tuning_logs/resnet50_conv2d.txt --trials 2900 --per-round 16 \
  --log tuning_logs/resnet50_conv2d.json --resume
