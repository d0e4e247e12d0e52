"""bench_gpu's cases through PyTorch (cuBLAS, cuDNN and its own kernels) in float32 with TF32
off, timed as bench_gpu times Tessel's kernels (CUDA events, one run untimed, then the mean of
20 back to back); joined with bench_gpu's JSON lines, it prints both and their ratio. The
networks are PyTorch eager modules of the same architectures with random weights (torchvision's
ResNet-50 and MobileNetV2, batch norm left as its own kernels, and a BERT-base layer written
here), timed as bench_gpu times Tessel's: the median of 20 runs, the input uploaded and the
output downloaded.

    python3 bench/gpu_peers.py bench_gpu.jsonl     (run by bench/bench_gpu.sh)
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True


def timed(fn, number=20):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / number


def wall_ms(fn, number=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(number):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[number // 2]


class BertLayer(torch.nn.Module):
    """One BERT-base encoder layer as models::bert_layer writes it (post-norm, erf GELU)."""

    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(hidden, hidden) for _ in range(4))
        self.up, self.down = torch.nn.Linear(hidden, ffn), torch.nn.Linear(ffn, hidden)
        self.ln1, self.ln2 = torch.nn.LayerNorm(hidden, eps=1e-12), torch.nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        b, s, h = x.shape
        split = lambda t: t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5, dim=-1)
        ctx = (p @ v).transpose(1, 2).reshape(b, s, h)
        h1 = self.ln1(self.o(ctx) + x)
        return self.ln2(self.down(F.gelu(self.up(h1))) + h1)


def network(name):
    import torchvision
    make, shape = {"net_resnet50": (lambda: torchvision.models.resnet50(), (1, 3, 224, 224)),
                   "net_mobilenetv2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
                   "net_bert_layer": (lambda: BertLayer(), (1, 128, 768))}[name]
    model = make().cuda().eval()
    x = torch.rand(*shape) * 2 - 1
    with torch.no_grad():
        return "PyTorch eager", wall_ms(lambda: model(x.cuda()).cpu())


def rand(*shape):
    return torch.rand(*shape, device="cuda") * 2 - 1


def peer(case):
    """(peer name, milliseconds) of bench_gpu's case by its name."""
    if case.startswith("gemm_"):
        n = int(case[5:])
        a, b = rand(n, n), rand(n, n)
        return "cuBLAS", timed(lambda: torch.mm(a, b))
    if case.startswith("conv2d_"):
        f = {p[0]: int(p[1:]) for p in case[7:].split("_")}  # C64_H56_K64_R3_s1
        pad = {7: 3, 3: 1, 1: 0}[f["R"]]
        x, w = rand(1, f["C"], f["H"], f["H"]), rand(f["K"], f["C"], f["R"], f["R"])
        return "cuDNN", timed(lambda: F.conv2d(x, w, stride=f["s"], padding=pad))
    if case == "softmax_4096x1024":
        x = rand(4096, 1024)
        return "torch", timed(lambda: torch.softmax(x, dim=-1))
    if case == "layer_norm_512x768":
        x, g, b = rand(512, 768), rand(768), rand(768)
        return "torch", timed(lambda: F.layer_norm(x, (768,), g, b))
    if case.startswith("net_"):
        return network(case)
    if case == "dense_bias_gelu_128x768x3072":
        x, w, b = rand(128, 768), rand(3072, 768), rand(3072)
        return "cuBLAS+torch", timed(lambda: F.gelu(F.linear(x, w, b)))
    return None, None


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
    print(f"device: {torch.cuda.get_device_name()} (torch {torch.__version__}, float32, TF32 off)")
    print(f"{'case':36} {'tessel ms':>10} {'peer':>13} {'peer ms':>10} {'tessel/peer speed':>18}")
    for r in rows:
        if "case" not in r or "cuda_ms" not in r:
            if "case" in r:
                print(f"{r['case']:36} {'-':>10}  ({r.get('cuda_error', 'not run on a CUDA device')[:80]})")
            continue
        name, ms = peer(r["case"])
        if name is None:
            continue
        print(f"{r['case']:36} {r['cuda_ms']:10.4f} {name:>13} {ms:10.4f} {ms / r['cuda_ms']:17.2f}x")


if __name__ == "__main__":
    main()
