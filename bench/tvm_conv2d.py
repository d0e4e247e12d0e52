"""Tunes one NCHW conv2d layer with TVM MetaSchedule; prints one JSON line: the tuned kernel's
GFLOP/s (timed by TVM's time_evaluator on this CPU) and the tuning wall time. Run by
bench/tvm_compare.sh in its own virtual environment."""
import argparse
import json
import os
import tempfile
import time

import numpy as np
import tvm
from tvm import te, topi
from tvm.s_tir import meta_schedule as ms


def cpu_target(threads):
    # LLVM may name a CPU whose AVX-512 the machine hides (a VM): ask for AVX2 then.
    flags = open("/proc/cpuinfo").read()
    mcpu = "native" if " avx512f" in flags else "znver3" if "AuthenticAMD" in flags else "haswell"
    mcpu = tvm.target.codegen.llvm_get_system_cpu() if mcpu == "native" else mcpu
    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": threads})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=256)
    p.add_argument("--C", type=int, default=64)
    p.add_argument("--H", type=int, default=56)
    p.add_argument("--K", type=int, default=64)
    p.add_argument("--R", type=int, default=3)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--pad", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    X = te.placeholder((1, a.C, a.H, a.H), name="X")
    W = te.placeholder((a.K, a.C, a.R, a.R), name="W")
    Y = topi.nn.conv2d_nchw(X, W, a.stride, a.pad, 1)
    func = te.create_prim_func([X, W, Y])
    target = cpu_target(a.threads)
    oh = (a.H + 2 * a.pad - a.R) // a.stride + 1
    flops = 2.0 * a.K * oh * oh * a.C * a.R * a.R
    with tempfile.TemporaryDirectory() as work:
        t0 = time.time()
        db = ms.tune_tir(func, target, work, max_trials_global=a.trials, num_tuning_cores=a.threads)
        tune_s = time.time() - t0
        sch = ms.tir_integration.compile_tir(db, func, target)
    lib = tvm.compile(sch.mod, target=target).jit()
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(np.random.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32"), dev)
            for t in (X, W)]
    args.append(tvm.runtime.tensor(np.zeros([int(d) for d in Y.shape], "float32"), dev))
    timer = lib.time_evaluator("main", dev, number=20, repeat=5, min_repeat_ms=40)
    sec = min(timer(*args).results)
    print(json.dumps({"bench": "tvm_compare", "impl": "tvm-metaschedule", "tvm": tvm.__version__, "target": str(target),
                      "trials": a.trials, "gflops": round(flops / sec / 1e9, 1), "tune_s": round(tune_s, 1)}))


if __name__ == "__main__":
    main()
