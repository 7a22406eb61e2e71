#!/usr/bin/python3
"""Runs tiny, its GEMM floor, PyTorch and LibTorch on the training-step cases and prints the table.

Called by bench/compare.sh (which builds the LibTorch peer first); see its header.
Each round runs every program once (tiny and the floor in bench_training_step,
then each peer in each variant), so that a change of machine load during the
run touches all of them alike; a cell is the median (or, with --stat min, the
minimum) over all rounds and repetitions of the mean step time of a timed run.
--json FILE keeps every sample; --from-json FILE prints the tables again from
such a file (e.g. with another --stat or --markdown) without running anything.

Variants of the peers (tiny always runs as built, with its default threads):
  shipped        no tuning: OMP_*, MALLOC_*, OPENBLAS_NUM_THREADS removed from the
                 environment, torch.set_num_threads(T)
  tuned-passive  MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=134217728
                 (glibc keeps freed tensors instead of unmapping them), OMP_WAIT_POLICY=PASSIVE
                 (idle OpenMP threads sleep instead of spinning against OpenBLAS's),
                 OPENBLAS_NUM_THREADS=T, torch.set_num_threads(T)
  tuned-omp1     the same malloc settings, OMP_NUM_THREADS=1 and torch.set_num_threads(1)
                 (PyTorch's own kernels on one thread), OPENBLAS_NUM_THREADS=T (GEMMs on T)
"tuned" in the summary is the faster of the two tuned variants, per case.
OPENBLAS_CORETYPE (and every other variable) is passed through unchanged.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MALLOC = {"MALLOC_MMAP_THRESHOLD_": "67108864", "MALLOC_TRIM_THRESHOLD_": "134217728"}
PEERS = ("pytorch", "libtorch")
VARIANTS = ("shipped", "tuned-passive", "tuned-omp1")
LABEL = {"pytorch": "PyTorch", "libtorch": "LibTorch"}
# tiny's step over the GEMM floor, at most (case: ratio).
FLOOR_TARGET = {"A": 2.0, "B": 1.5, "C": 2.0}


def log(msg):
    print(f"compare: {msg}", file=sys.stderr, flush=True)


def base_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("OMP_", "MALLOC_", "GOMP_")) or k in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"):
            del env[k]
    return env


def variant_env(variant, threads):
    env = base_env()
    if variant == "tuned-passive":
        env.update(MALLOC, OMP_WAIT_POLICY="PASSIVE", OPENBLAS_NUM_THREADS=str(threads))
        return env, threads
    if variant == "tuned-omp1":
        env.update(MALLOC, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS=str(threads))
        return env, 1
    return env, threads


def run_tiny(args, samples):
    cmd = [args.tiny, f"--benchmark_filter=^(TinyStep|GemmFloor)/[{args.cases}]/",
           f"--benchmark_repetitions={args.repetitions}", f"--benchmark_min_time={args.min_time}",
           "--benchmark_format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ)).stdout
    factor = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        kind, case = b["run_name"].split("/")[:2]
        impl = "tiny" if kind == "TinyStep" else "floor"
        samples.setdefault((impl, "-", case), []).append(b["real_time"] * factor[b["time_unit"]])
        samples.setdefault(("threads", "-", case), []).append(b.get("threads", 0))


def run_peer(args, peer, variant, threads, samples):
    env, t = variant_env(variant, threads)
    common = ["--cases", args.cases, "--threads", str(t), "--repetitions", str(args.repetitions),
              "--min-time", str(args.min_time)]
    cmd = [sys.executable, args.torch_script] + common if peer == "pytorch" else [args.libtorch] + common
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    for line in out.splitlines():
        r = json.loads(line)
        samples.setdefault((peer, variant, r["case"]), []).extend(r["ms_runs"])


def fmt(ms):
    return f"{ms:.3f}" if ms < 10 else f"{ms:.2f}"


def table(args, med, markdown):
    cases = list(args.cases)
    lines = []
    # The summary: tiny, floor, each peer shipped and best tuned, and the ratios.
    head = ["case", "tiny", "GEMM floor"]
    for p in PEERS:
        head += [f"{LABEL[p]} shipped", f"{LABEL[p]} tuned"]
    head += ["tiny/floor"] + [f"tiny/{LABEL[p]} {v}" for p in PEERS for v in ("shipped", "tuned")]
    rows = []
    best = {}
    for c in cases:
        tiny, floor = med[("tiny", "-", c)], med[("floor", "-", c)]
        row = [c, fmt(tiny), fmt(floor)]
        ratios = [f"{tiny / floor:.2f}"]
        for p in PEERS:
            shipped = med[(p, "shipped", c)]
            v = min(("tuned-passive", "tuned-omp1"), key=lambda v: med[(p, v, c)])
            best[(p, c)] = v
            tuned = med[(p, v, c)]
            row += [fmt(shipped), f"{fmt(tuned)} ({v[6:]})"]
            ratios += [f"{tiny / shipped:.2f}", f"{tiny / tuned:.2f}"]
        rows.append(row + ratios)
    lines += render(head, rows, markdown)
    lines.append("")
    # Every variant, for the record.
    head2 = ["case"] + [f"{LABEL[p]} {v}" for p in PEERS for v in VARIANTS]
    rows2 = [[c] + [fmt(med[(p, v, c)]) for p in PEERS for v in VARIANTS] for c in cases]
    lines += render(head2, rows2, markdown)
    lines.append("")
    # Targets of the "Training stack" issue, and the floor's of the one on convolutions and the CPU step.
    for c in cases:
        tiny = med[("tiny", "-", c)]
        checks = []
        for p in PEERS:
            s, t = med[(p, "shipped", c)], med[(p, best[(p, c)], c)]
            checks.append(f"{'met' if tiny <= s / 2 else 'MISSED'}: >= 2x faster than {LABEL[p]} shipped ({s / tiny:.2f}x)")
            checks.append(f"{'met' if tiny <= t else 'MISSED'}: at least as fast as {LABEL[p]} tuned ({t / tiny:.2f}x)")
        if c in FLOOR_TARGET:
            f, limit = med[("floor", "-", c)], FLOOR_TARGET[c]
            checks.append(f"{'met' if tiny <= limit * f else 'MISSED'}: step <= {limit:g}x the GEMM floor ({tiny / f:.2f}x)")
        lines.append(f"{c}: " + "; ".join(checks))
    return "\n".join(lines)


def render(head, rows, markdown):
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        return out + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) for x, w in zip(r, widths))
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", help="bench_training_step executable")
    parser.add_argument("--libtorch", help="bench_libtorch executable")
    parser.add_argument("--torch-script", help="bench_torch.py")
    parser.add_argument("--cases", default="ABC")
    parser.add_argument("--rounds", type=int, default=2, help="times every program runs (default 2)")
    parser.add_argument("--repetitions", type=int, default=3, help="timed runs per program and case (default 3)")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per timed run (default 0.5)")
    default_threads = int(os.environ.get("TINY_NUM_THREADS", 0)) or len(os.sched_getaffinity(0))
    parser.add_argument("--threads", type=int, default=default_threads,
                        help=f"the peers' thread count T (default: tiny's, {default_threads})")
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="how a cell combines its runs: median (default) or min (the least disturbed run)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--json", help="also write every sample to this file")
    parser.add_argument("--from-json", help="print the tables from a file written by --json, running nothing")
    args = parser.parse_args()
    if not args.cases or any(c not in "ABC" for c in args.cases):
        parser.error("--cases takes letters from ABC")

    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        samples = {tuple(k.split("|")): v for k, v in saved["samples"].items()}
        args.rounds, args.repetitions, args.min_time, args.threads = (saved[k] for k in
                                                                      ("rounds", "repetitions", "min_time", "threads"))
    else:
        if not (args.tiny and args.libtorch and args.torch_script):
            parser.error("--tiny, --libtorch and --torch-script are needed (bench/compare.sh passes them)")
        samples = {}
        for r in range(args.rounds):
            log(f"round {r + 1}/{args.rounds}: tiny and the GEMM floor")
            run_tiny(args, samples)
            for p in PEERS:
                for v in VARIANTS:
                    log(f"round {r + 1}/{args.rounds}: {LABEL[p]} {v}")
                    run_peer(args, p, v, args.threads, samples)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rounds": args.rounds, "repetitions": args.repetitions, "min_time": args.min_time,
                           "threads": args.threads, "samples": {"|".join(k): v for k, v in samples.items()}},
                          f, indent=1)
            log(f"samples: {args.json}")
    combine = statistics.median if args.stat == "median" else min
    med = {k: combine(v) for k, v in samples.items()}
    threads = int(med.get(("threads", "-", args.cases[0]), 0))
    print(f"ms per training step ({args.stat} of {args.rounds} rounds x {args.repetitions} runs of >= {args.min_time} s); "
          f"tiny on {threads} threads, peers on T = {args.threads}; ratios < 1: tiny is faster")
    print(table(args, med, args.markdown))


if __name__ == "__main__":
    main()
