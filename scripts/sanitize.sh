#!/usr/bin/env bash
# Builds Tessel with AddressSanitizer and UndefinedBehaviorSanitizer into ./build-sanitize and
# runs the whole test suite there; any report fails the run.
#   bash scripts/sanitize.sh [ctest arguments...]
# Left out: the install test (an instrumented libtessel in another project's program needs the
# sanitizer runtime loaded first), and nothing else. Kernels the JIT generates are not
# instrumented; the compiler, tuner and runtime around them are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSEL_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-sanitize --parallel "$(nproc)"
# handle_segv=0: the tuner's tests plant candidates that crash in their worker on purpose and
# expect the crash as a signal; ASan's own checks do not need the handler.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:handle_segv=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
cd build-sanitize
ctest --output-on-failure --parallel "$(nproc)" --timeout 2400 -E '^Install\.' "$@"
