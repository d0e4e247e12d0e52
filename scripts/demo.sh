#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the main demo: tune an NCHW conv2d on this CPU with
# a small budget (64 trials), write a tuning log, rebuild the kernel from the log alone and print
# its speed-up over the default schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/example_tune_demo 64 build/demo_tuning_log.json
