#!/usr/bin/python3
"""PyTorch peer of bench/gpu/bench_calibration.cpp: the same rows, timed the same way.

    python3 bench/peers/bench_torch_calibration.py [--repetitions 5] [--out FILE.json]

Host rows are wall time per call (each call as the C++ row does it, ending in a
synchronize); device rows are CUDA-event time per op, K ops queued behind a
long spacer kernel so that they run back to back. Each row is run
--repetitions times; the JSON holds every repetition's time in microseconds
(min, median and max are what bench/gpu/collect.py keeps). Gemm/tf32 has no
tiny counterpart: float32 on the tensor cores (allow_tf32), off by default.
"""
import argparse
import json
import statistics
import sys
import time

import torch

GPU = torch.device("cuda:0")


def host_row(fn, min_time):
    fn()
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.02:
        fn()
        n += 1
    calls = max(3, int(min_time / ((time.perf_counter() - t0) / n)))
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


SPACER = None


def device_row(op, ops, repetitions):
    global SPACER
    if SPACER is None:
        SPACER = torch.randn(4096, 4096, device=GPU)
    for _ in range(3):
        op()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repetitions):
        torch.matmul(SPACER, SPACER)
        torch.matmul(SPACER, SPACER)
        start.record()
        for _ in range(ops):
            op()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / ops)
    return times


def rows():
    x = torch.zeros(1, device=GPU)
    yield "Sync/idle", "host", lambda: torch.cuda.synchronize()
    yield "OpSync/add_", "host", lambda: (x.add_(1), torch.cuda.synchronize())
    yield "Item/after_op", "host", lambda: (x + 1).item()

    def launch_rate(in_place):
        def run():
            for _ in range(1000):
                if in_place:
                    x.add_(1)
                else:
                    x + 1
            torch.cuda.synchronize()
        return run
    yield "LaunchRate/add_/1000", "host", launch_rate(True)
    yield "LaunchRate/add/1000", "host", launch_rate(False)

    for n in (1, 1 << 16, 1 << 20, 1 << 24, 1 << 26):
        a, b = torch.randn(n, device=GPU), torch.randn(n, device=GPU)
        ops = 5 if n >= 1 << 24 else 50
        p = torch.randn(n, device=GPU, requires_grad=True)
        p.grad = torch.randn(n, device=GPU)
        adam = torch.optim.Adam([p], foreach=False, fused=False)
        for name, op in (("add", lambda: a + b), ("relu", lambda: a.relu()), ("sum", lambda: a.sum()),
                         ("clone", lambda: a.clone()), ("zero_", lambda: b.zero_()),
                         ("to_bf16", lambda: a.to(torch.bfloat16)), ("adam", lambda: adam.step())):
            yield f"Kernel/{name}/{n}", "device", (op, ops)
        del a, b, p, adam

    shapes = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)] + [(n, n, n) for n in (1000, 1023, 4095)]
    for batch, fan_in, fan_out in ((64, 784, 512), (64, 512, 256), (64, 256, 10), (128, 1024, 2048),
                                   (128, 2048, 512), (128, 512, 10), (32, 784, 256), (32, 256, 10)):
        shapes += [(batch, fan_out, fan_in), (batch, fan_in, fan_out), (fan_in, fan_out, batch)]
    for name, dtype, tf32 in (("float32", torch.float32, False), ("tf32", torch.float32, True),
                              ("float16", torch.float16, False), ("bfloat16", torch.bfloat16, False)):
        for m, n, k in shapes:
            a, b = torch.randn(m, k, device=GPU).to(dtype), torch.randn(k, n, device=GPU).to(dtype)

            def gemm(a=a, b=b, tf32=tf32):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return torch.matmul(a, b)
            yield f"Gemm/{name}/{m}/{n}/{k}", "device", (gemm, 5 if 2 * m * n * k > 1e11 else 50)
        for n in (1024, 4096):
            a = torch.randn(n, n, device=GPU).to(dtype)

            def sync_mm(a=a, tf32=tf32):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.matmul(a, a)
                torch.cuda.synchronize()
            yield f"MatmulSync/{name}/{n}", "host", sync_mm
    torch.backends.cuda.matmul.allow_tf32 = False

    for pinned in (False, True):
        kind = "pinned" if pinned else "pageable"
        for kib in (4, 64, 1024, 16384, 262144):
            src = torch.rand(kib << 8)
            if pinned:
                src = src.pin_memory()
            yield f"CopyToGpu/{kind}/{kib}", "host", (
                lambda src=src, pinned=pinned: (src.to(GPU, non_blocking=pinned), torch.cuda.synchronize()))
            dev = torch.rand(kib << 8, device=GPU)
            dst = torch.empty(kib << 8).pin_memory() if pinned else None
            if pinned:
                yield f"CopyToCpu/{kind}/{kib}", "host", (
                    lambda dev=dev, dst=dst: (dst.copy_(dev, non_blocking=True), torch.cuda.synchronize()))
            else:
                yield f"CopyToCpu/{kind}/{kib}", "host", lambda dev=dev: dev.cpu()
    a = torch.randn(4096, 4096, device=GPU)
    yield "PageableAfterKernel/4096", "host", lambda: torch.matmul(a, a)[0, 0].cpu()
    src = torch.rand(256 << 18).pin_memory()
    side = torch.cuda.Stream()

    def overlap(side_stream):
        def run():
            torch.matmul(a, a)
            if side_stream:
                with torch.cuda.stream(side):
                    src.to(GPU, non_blocking=True)
            else:
                src.to(GPU, non_blocking=True)
            torch.cuda.synchronize()
        return run
    yield "Overlap/same_stream", "host", overlap(False)
    yield "Overlap/side_stream", "host", overlap(True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per host row repetition")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no GPU: torch.cuda.is_available() is False")
    results = {"peer": f"torch {torch.__version__}", "gpu": torch.cuda.get_device_name(GPU), "rows": {}}
    for name, kind, what in rows():
        if kind == "host":
            times = [host_row(what, args.min_time) for _ in range(args.repetitions)]
        else:
            op, ops = what
            times = device_row(op, ops, args.repetitions)
        results["rows"][name] = {"kind": kind, "us": times}
        print(f"{name:40s} {kind:6s} median {statistics.median(times):12.3f} us", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
