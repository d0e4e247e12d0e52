#!/usr/bin/env bash
# Installs every Debian package Tessel builds, tests and benchmarks against.
# Safe to re-run: apt-get skips what is already present.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config zlib1g-dev
  llvm-19-dev libzstd-dev
  libxgboost-dev xgboost
  libeigen3-dev nlohmann-json3-dev libboost-program-options-dev
  libgtest-dev libbenchmark-dev
  libopenblas-dev libdnnl-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers
  libonnx-dev libprotobuf-dev libonnx-testdata
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
