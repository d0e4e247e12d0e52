#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the main demo: tune a GEMM on this CPU with a
# small budget, write a tuning log, rebuild the kernel from the log, print the speed-up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/example_tune_demo 64 build/demo_tuning_log.json
