#!/usr/bin/python3
"""PyTorch peer of bench/bench_conv.cpp: F.conv2d on the CPU on the shapes of bench/conv_cases.h.

Run with Debian's python3 (torch 1.13, whose CPU convolution is oneDNN's):

    /usr/bin/python3 bench/peers/bench_torch_conv.py --threads 2

Prints one JSON object per row on stdout:
    {"impl": "pytorch", "name": "Conv2d/fashion1/forward", "ms": ..., "ms_runs": [...], "threads": 2}
ms is the median over --repetitions runs of the mean time of one call in each
run (each run lasts at least --min-time seconds), after a warm-up. forward runs
under torch.no_grad(); forward_backward is y = conv2d(x, w, b); y.backward(g)
with the gradients set to None first, as bench_conv.cpp does.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

# name, N, C_in, C_out, H = W, k, stride, padding: bench/conv_cases.h
CASES = [
    ("fashion1", 64, 1, 32, 28, 3, 1, 1),
    ("fashion2", 64, 32, 64, 14, 3, 1, 1),
    ("resnet", 8, 64, 64, 56, 3, 1, 1),
    ("resnet_s2", 8, 64, 128, 56, 3, 2, 1),
]


def timed(fn, min_time, repetitions):
    for _ in range(3):
        fn()
    runs = []
    for _ in range(repetitions):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        runs.append(1000.0 * elapsed / n)
    return statistics.median(runs), runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--repetitions", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    for name, n, cin, cout, size, k, stride, pad in CASES:
        x = torch.randn(n, cin, size, size)
        w = torch.randn(cout, cin, k, k) * 0.1
        b = torch.randn(cout)
        g = torch.randn(F.conv2d(x, w, b, stride=stride, padding=pad).shape)

        def forward():
            with torch.no_grad():
                F.conv2d(x, w, b, stride=stride, padding=pad)

        xr, wr, br = (t.clone().requires_grad_(True) for t in (x, w, b))

        def forward_backward():
            for t in (xr, wr, br):
                t.grad = None
            F.conv2d(xr, wr, br, stride=stride, padding=pad).backward(g)

        for mode, fn in (("forward", forward), ("forward_backward", forward_backward)):
            ms, runs = timed(fn, args.min_time, args.repetitions)
            print(json.dumps({"impl": "pytorch", "name": "Conv2d/%s/%s" % (name, mode), "ms": ms, "ms_runs": runs,
                              "threads": args.threads, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
