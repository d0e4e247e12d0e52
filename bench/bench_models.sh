#!/usr/bin/env bash
# Whole networks against onnxruntime (bench_models.cpp): installs onnxruntime from PyPI into
# this script's own virtual environment (never the test command's), builds, and runs.
#   bash bench/bench_models.sh [runs=20 [passes=3 [network]]]
# ORT_VENV chooses the venv (default ~/.cache/tessel/ort-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ORT_VENV:-$HOME/.cache/tessel/ort-venv}
if ! "$venv/bin/python" -c "import onnxruntime, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q onnxruntime numpy
fi
bash scripts/build.sh > /dev/null
echo "onnxruntime $("$venv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)'), $(nproc) cores:" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
build/bench/bench_models build/bench/models "$venv/bin/python" "${1:-20}" "${2:-3}" ${3:-}
