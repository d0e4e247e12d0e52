#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/example_matmul 1024
