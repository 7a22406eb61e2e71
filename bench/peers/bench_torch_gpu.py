#!/usr/bin/python3
"""PyTorch peer of bench/bench_gpu.cpp: matrix products and host<->GPU copies on a real GPU.

    python3 bench/peers/bench_torch_gpu.py [--repetitions 5] [--min-time 0.5]

Prints one line per benchmark, named as bench_gpu's, with the median over
--repetitions runs of the mean time of each run (each run lasts at least
--min-time seconds, every call followed by torch.cuda.synchronize()).
Matmul/tf32 has no tiny counterpart: float32 on the tensor cores, which
PyTorch leaves off by default for matrix products (torch.backends.cuda.matmul.allow_tf32).
"""
import argparse
import statistics
import sys
import time

import torch


def timed(fn, args):
    fn()
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.1:
        fn()
        torch.cuda.synchronize()
        n += 1
    calls = max(3, int(args.min_time / ((time.perf_counter() - t0) / n)))
    runs = []
    for _ in range(args.repetitions):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / calls)
    return statistics.median(runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no GPU: torch.cuda.is_available() is False")
    gpu = torch.device("cuda:0")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(gpu)}")
    for name, dtype, tf32 in [("float32", torch.float32, False), ("tf32", torch.float32, True),
                              ("float16", torch.float16, False), ("bfloat16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for n in (1024, 4096):
            a = torch.randn(n, n, device=gpu).to(dtype)
            b = torch.randn(n, n, device=gpu).to(dtype)
            s = timed(lambda: torch.matmul(a, b), args)
            print(f"Matmul/{name}/{n:<6} {s * 1e3:9.3f} ms  {2 * n ** 3 / s * 1e-12:7.1f} TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    mib = 256
    for pinned in (False, True):
        kind = "pinned" if pinned else "pageable"
        src = torch.rand(mib << 18)
        src = src.pin_memory() if pinned else src
        s = timed(lambda: src.to(gpu, non_blocking=pinned), args)
        print(f"CopyToGpu/{kind}/{mib} {s * 1e3:9.3f} ms  {src.numel() * 4 / s * 1e-9:7.1f} GB/s")
        on_gpu = src.to(gpu)
        if pinned:
            dst = torch.empty(src.shape).pin_memory()
            s = timed(lambda: dst.copy_(on_gpu, non_blocking=True), args)
        else:
            s = timed(lambda: on_gpu.cpu(), args)
        print(f"CopyToCpu/{kind}/{mib} {s * 1e3:9.3f} ms  {src.numel() * 4 / s * 1e-9:7.1f} GB/s")


if __name__ == "__main__":
    main()
