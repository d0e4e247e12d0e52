#!/usr/bin/env bash
# Regenerates the tuning logs in tuning_logs/ on this machine: the GEMMs and the NCHW16c list take
# about 45 minutes on 2 cores, each list of convolutions in the layouts users give about 40 to 60 more.
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
# Every distinct ResNet-50 and MobileNetV2 convolution in NCHW and NHWC: 256 trials a layer.
for list in resnet50_conv2d_nchw:5888 resnet50_conv2d_nhwc:5888 mobilenetv2_conv2d:7680 mobilenetv2_conv2d_nhwc:7680; do
  ./build/tune --workloads "tuning_logs/${list%:*}.txt" --trials "${list#*:}" --log "tuning_logs/${list%:*}.json" --resume
done
