#!/usr/bin/env bash
# Installs this build into a temporary prefix, builds examples/consumer against it with
# find_package(Tessel) only, then deletes the consumer's build tree and the prefix and runs
# the plain C program on the exported kernel library alone.
#   consumer.sh TESSEL_BUILD_DIR TESSEL_SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
lib=$(ls "$tmp"/prefix/lib*/libtessel.so.0)
if readelf -d "$lib" | grep -q 'NEEDED.*xgboost'; then
  echo "consumer.sh: the installed libtessel links XGBoost; only the tuner may need it (it loads it itself)"; exit 1
fi
inc=$(PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig pkg-config --variable=includedir tessel)
[ -f "$inc/tessel/tessel.h" ] ||
  { echo "consumer.sh: tessel.pc's include directory $inc has no tessel/tessel.h"; exit 1; }
cmake -S "$src/examples/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DBLUR_TRIALS=8 > /dev/null
cmake --build "$tmp/build"
mkdir "$tmp/deploy"
cp "$tmp/build/caller" "$tmp/build/libblur3x3.so" "$tmp/deploy/"
rm -rf "$tmp/build" "$tmp/prefix"
"$tmp/deploy/caller"
