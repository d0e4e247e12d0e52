"""onnxruntime, the peer of bench_models: runs one model on the input bench_models wrote and
prints one JSON line (median latency, peak RSS of this process); writes the outputs for the
comparison. Runs in the bench script's own virtual environment, never the test command's.

  python ort_run.py MODEL.onnx INPUT.bin OUTPUT.bin THREADS RUNS
"""
import json
import resource
import sys
import time

import numpy as np
import onnxruntime as ort

path, input_path, output_path, threads, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
first = session.get_inputs()[0]
x = np.fromfile(input_path, dtype=np.float32).reshape(first.shape)
outputs = session.run(None, {first.name: x})
for _ in range(3):
    session.run(None, {first.name: x})
times = []
for _ in range(runs):
    start = time.perf_counter()
    session.run(None, {first.name: x})
    times.append(time.perf_counter() - start)
outputs[0].astype(np.float32).tofile(output_path)
print(json.dumps({"impl": "onnxruntime", "version": ort.__version__, "threads": threads,
                  "ms": float(np.median(times)) * 1e3,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
