#!/usr/bin/env bash
# Tunes the same NCHW conv2d layer with TVM MetaSchedule and with Tessel's `tune`, with the
# same trial budget on this CPU, and prints each one's kernel GFLOP/s and tuning wall time
# side by side, then the ratios. TVM comes from PyPI into its own virtual environment
# (never the test command's): apache-tvm, with apache-tvm-ffi pinned to 0.1.14.post1 (its
# next release crashes when MetaSchedule saves its database).
#
#   bash bench/tvm_compare.sh [trials=256] [C=64 H=56 K=64 R=3 stride=1 pad=1]
#
# Needs build/tune (scripts/build.sh) and network access for the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-256}
C=${2:-64} H=${3:-56} K=${4:-64} R=${5:-3} stride=${6:-1} pad=${7:-1}
venv=${TVM_VENV:-$HOME/.cache/tessel/tvm-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import tvm, xgboost, cloudpickle" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q apache-tvm "apache-tvm-ffi==0.1.14.post1" xgboost cloudpickle psutil tornado numpy
fi
[ -x build/tune ] || { echo "build/tune is missing: run scripts/build.sh first" >&2; exit 1; }

tvm_json=$("$venv/bin/python" bench/tvm_conv2d.py --trials "$trials" --C "$C" --H "$H" --K "$K" --R "$R" \
  --stride "$stride" --pad "$pad" 2>/dev/null | grep '"tvm_compare"')
echo "$tvm_json"

log=$(mktemp /tmp/tessel_tvm_compare.XXXXXX.json)
rm -f "$log"
start=$(date +%s%N)
out=$(build/tune --op conv2d --shape "C=$C,H=$H,W=$H,K=$K,R=$R,S=$R,stride=$stride,pad=$pad" --trials "$trials" \
  --log "$log" 2>&1)
tessel_s=$(python3 -c "print(($(date +%s%N) - $start) / 1e9)")
# The summary rows: task, shape, best GF/s, default GF/s, ... A 3x3 stride-1 layer is tuned by
# Winograd's algorithm too (its row counts the direct sum's flops); a deployment builds the faster.
tessel_gflops=$(echo "$out" | awk '($1 == "conv2d" || $1 == "conv2d_winograd") && $3 ~ /^[0-9.]+$/ {
  if ($3 > best) best = $3 } END { print best }')
rm -f "$log"
printf '{"bench": "tvm_compare", "impl": "tessel", "trials": %d, "gflops": %s, "tune_s": %.1f}\n' \
  "$trials" "$tessel_gflops" "$tessel_s"
python3 - "$tvm_json" "$tessel_gflops" "$tessel_s" <<'PY'
import json, sys
tvm = json.loads(sys.argv[1])
gflops, seconds = float(sys.argv[2]), float(sys.argv[3])
print(json.dumps({"bench": "tvm_compare", "ratio": "tessel/tvm", "kernel_speed": round(gflops / tvm["gflops"], 3),
                  "tuning_time": round(seconds / tvm["tune_s"], 3)}))
PY
