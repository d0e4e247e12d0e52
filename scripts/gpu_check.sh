#!/usr/bin/env bash
# Checks the static GPU model against a real GPU. On a machine with a GPU and nothing but a
# C++ compiler, CMake, the CUDA driver and this source tree: builds tessel-runner (no LLVM,
# no XGBoost), runs the jobs that `tune --target cuda --export-jobs DIR` prepared elsewhere,
# and prints each job's measured time beside the model's estimate, with their rank
# correlation (Spearman).
#
#   scripts/gpu_check.sh DIR            # DIR holds jobs.txt and estimates.tsv
#   KIND=opencl scripts/gpu_check.sh DIR  # the same through the local OpenCL device
set -euo pipefail
dir=${1:?usage: scripts/gpu_check.sh DIR (from tune --target cuda --export-jobs DIR)}
kind=${KIND:-cuda}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RUNNER_BUILD:-$root/build-runner}
[ -f "$dir/jobs.txt" ] && [ -f "$dir/estimates.tsv" ] || { echo "gpu_check: $dir has no jobs.txt/estimates.tsv" >&2; exit 2; }
cmake -S "$root/tools/runner" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$build.log" 2>&1 || { cat "$build.log" >&2; exit 2; }
cmake --build "$build" -j > "$build.log" 2>&1 || { cat "$build.log" >&2; exit 2; }
"$build/tessel-runner" "$kind" < "$dir/jobs.txt" > "$dir/results.txt" || true
hello=$(head -1 "$dir/results.txt")
case "$hello" in
  "hello $kind -"*|"") echo "gpu_check: the runner has no $kind device: ${hello#hello $kind - }" >&2; exit 3 ;;
esac
echo "device: ${hello#hello $kind }"
awk -F'\t' '
  FNR == NR { est[$1] = $2; key[$1] = $3; next }
  $0 ~ /^result / {
    k = split($0, f, " ")
    if (f[3] != "ok") { errors++; next }
    best = f[4] + 0; for (i = 5; i <= k; i++) if (f[i] + 0 < best) best = f[i] + 0
    if (!(f[2] in est)) next
    n++; id[n] = f[2]; e[n] = est[f[2]]; m[n] = best
  }
  function ranks(v, r,   i, j, less, same) {
    for (i = 1; i <= n; i++) { less = 0; same = 0
      for (j = 1; j <= n; j++) { if (v[j] < v[i]) less++; else if (v[j] == v[i]) same++ }
      r[i] = less + (same + 1) / 2 }
  }
  END {
    printf "%8s %-60s %14s %14s %8s\n", "job", "workload", "estimate ms", "measured ms", "ratio"
    for (i = 1; i <= n; i++)
      printf "%8s %-60s %14.4f %14.4f %8.2f\n", id[i], substr(key[id[i]], 1, 60), e[i] * 1e3, m[i] * 1e3, m[i] / e[i]
    if (n < 3) { print "too few measured jobs for a rank correlation"; exit }
    ranks(e, re); ranks(m, rm)
    for (i = 1; i <= n; i++) { se += re[i]; sm += rm[i] }
    se /= n; sm /= n
    for (i = 1; i <= n; i++) { cov += (re[i] - se) * (rm[i] - sm); ve += (re[i] - se) ^ 2; vm += (rm[i] - sm) ^ 2 }
    printf "%d jobs measured, %d failed; Spearman rank correlation of estimate and measurement: %.3f\n", n, errors, \
      (ve > 0 && vm > 0) ? cov / sqrt(ve * vm) : 0
  }' "$dir/estimates.tsv" "$dir/results.txt"
