#!/usr/bin/python3
"""PyTorch (eager) peer of bench/bench_training_step.cpp: the same three training steps.

Run with Debian's python3 (torch 1.13):

    /usr/bin/python3 bench/peers/bench_torch.py                 # all cases, 2 threads
    /usr/bin/python3 bench/peers/bench_torch.py --cases A --threads 1
    python3 bench/peers/bench_torch.py --device cuda            # on a GPU: peer of TinyStepCuda

On a GPU each step ends with torch.cuda.synchronize(), as TinyStepCuda's ends
with tiny::cuda::synchronize(0), so both time whole steps, not their queuing.

Prints one JSON object per case on stdout:
    {"impl": "pytorch", "case": "A", "ms_per_step": ..., "ms_runs": [...], "threads": 2, ...}
ms_per_step is the median over --repetitions timed runs of the mean step time
of each run (each run lasts at least --min-time seconds), after a warm-up.

The cases and the data generator are those of bench/training_cases.h: keep them in step.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CASES = {
    #      sizes                  batch dropout adam
    "A": ([784, 512, 256, 10], 64, 0.2, True),
    "B": ([1024, 2048, 512, 10], 128, 0.0, True),
    "C": ([784, 256, 10], 32, 0.0, False),
}
ADAM_LR, SGD_LR, SGD_MOMENTUM = 1e-3, 0.01, 0.9
INPUT_SEED, LABEL_SEED = 0xB0B0001, 0xB0B0002


def splitmix64(seed, count):
    i = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def case_data(sizes, batch):
    x = ((splitmix64(INPUT_SEED, batch * sizes[0]) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24))
    y = (splitmix64(LABEL_SEED, batch) >> np.uint64(32)) % np.uint64(sizes[-1])
    return torch.from_numpy(x.reshape(batch, sizes[0]).copy()), torch.from_numpy(y.astype(np.int64))


def make_model(sizes, dropout):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def run_case(name, args):
    sizes, batch, dropout, adam = CASES[name]
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = make_model(sizes, dropout).train().to(device)
    if adam:
        opt = torch.optim.Adam(model.parameters(), lr=ADAM_LR)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=SGD_LR, momentum=SGD_MOMENTUM)
    x, y = (t.to(device) for t in case_data(sizes, batch))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sync()

    for _ in range(args.warmup):
        step()
    # Calibrate the number of steps per run so that a run lasts about min_time.
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.1:
        step()
        n += 1
    per_step = (time.perf_counter() - t0) / n
    steps = max(20, int(args.min_time / per_step))
    runs = []
    for _ in range(args.repetitions):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        runs.append((time.perf_counter() - t0) / steps * 1e3)
    return {
        "impl": "pytorch",
        "case": name,
        "ms_per_step": statistics.median(runs),
        "ms_min": min(runs),
        "ms_runs": runs,
        "steps_per_run": steps,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "env": {k: os.environ[k] for k in sorted(os.environ)
                if k.startswith(("OMP_", "MALLOC_", "OPENBLAS_"))},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="ABC", help="which cases, e.g. AB (default ABC)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to train (default cpu)")
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds per timed run (default 1.0)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: this torch sees no GPU (torch.cuda.is_available() is False)")
    for name in args.cases:
        if name not in CASES:
            sys.exit(f"unknown case {name!r}: cases are {''.join(CASES)}")
        print(json.dumps(run_case(name, args)), flush=True)


if __name__ == "__main__":
    main()
