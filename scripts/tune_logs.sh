#!/usr/bin/env bash
# Regenerates the tuning logs in tuning_logs/ on this machine: the GEMMs and the NCHW16c list take
# about 45 minutes on 2 cores, each list of convolutions in the layouts users give about 40 to 60 more.
# Run nothing else meanwhile: measurements share the two cores.
# The logs are committed gzip-compressed (readers take either form); the tuner appends to the
# plain file, so each is decompressed before its run and compressed again after it. An
# interrupted run continues where it stopped (the budgets are totals): run this again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
tune() {  # LOG ARGS...: tune into tuning_logs/LOG.json, resuming it
  local log=tuning_logs/$1.json
  shift
  [ -f "$log.gz" ] && [ ! -f "$log" ] && gunzip -k "$log.gz"
  ./build/tune "$@" --log "$log" --resume
  gzip -9 -f "$log"
}
tune gemm_1024 --op matmul --shape M=1024,N=1024,K=1024 --trials 320
tune gemm_512 --op matmul --shape M=512,N=512,K=512 --trials 216
tune gemm_2048 --op matmul --shape M=2048,N=2048,K=2048 --trials 216
tune resnet50_conv2d --workloads tuning_logs/resnet50_conv2d.txt --trials 2900 --per-round 16
# Every distinct ResNet-50 and MobileNetV2 convolution in NCHW and NHWC: 256 trials a layer.
for list in resnet50_conv2d_nchw:5888 resnet50_conv2d_nhwc:5888 mobilenetv2_conv2d:7680 mobilenetv2_conv2d_nhwc:7680; do
  tune "${list%:*}" --workloads "tuning_logs/${list%:*}.txt" --trials "${list#*:}"
done
# The other shapes (5x5 windows, channel counts off the vector, 5x5 depthwise): 64 and 32 trials a layer.
for list in odd_conv2d_nchw:704 odd_conv2d_nhwc:352; do
  tune "${list%:*}" --workloads "tuning_logs/${list%:*}.txt" --trials "${list#*:}" --per-round 8
done
# The networks of bench_models (it writes them to build/bench/models: run bench/bench_models.sh
# once first), each in the layout bench_models runs it in; graph tuning times kernels as the
# network runs them (TuneOptions::flush_caches).
graph_tune() {  # LOG MODEL LAYOUT TRIALS
  local log=tuning_logs/$1.json
  [ -f "$log.gz" ] && [ ! -f "$log" ] && gunzip -k "$log.gz"
  ./build/tessel-compile "build/bench/models/$2.onnx" --layout "$3" --tune --trials "$4" --log "$log" --resume \
    --runs 0
  gzip -9 -f "$log"
}
if [ -f build/bench/models/resnet50.onnx ]; then
  graph_tune resnet50_nchwc_graph resnet50 NCHWc 2500
  graph_tune mobilenetv2_nhwc_graph mobilenetv2 NHWC 1000
  graph_tune bert_layer_graph bert_layer model 3000
fi
