#!/usr/bin/env python3
"""Turns what bench/gpu/run.sh wrote into one committed measurement file.

    bench/gpu/collect.py RUN_DIR --model h100-sxm [--out data/gpu_measurements/NAME.json]

Where RUN_DIR holds kernel_choices.jsonl (bench/gpu/kernel_choices.cpp), it
also writes NAME-kernels.json beside: for each case, the kernels CUPTI saw
(full names) with each one's device times in microseconds.

Every row keeps the minimum, median and maximum over its repetitions, in
microseconds (Google Benchmark's per-iteration time: host rows are wall time
per call, device rows CUDA-event time per op). Rows are named
"<peer>/<benchmark name>" with peer "tiny" (bench_calibration, bench_training_step,
bench_half) or "torch" (bench/peers/bench_torch_calibration.py). Only the Python
standard library is needed.
"""
import argparse
import json
import pathlib
import re
import statistics
import sys

UNIT_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def benchmark_rows(path, peer):
    """Google Benchmark JSON -> {name: [us per repetition]} (aggregates and errors left out)."""
    data = json.loads(path.read_text())
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        name = re.sub(r"(/iterations:\d+)?/(manual_time|real_time)$", "", b["run_name"])
        time = b["real_time"] * UNIT_TO_US[b["time_unit"]]
        rows.setdefault(f"{peer}/{name}", []).append(time)
    return rows, data.get("context", {})


def kernel_choices(path):
    """kernel_choices.jsonl -> {case: [{"kernel": name, "us": [device times]}]} in launch order."""
    cases = {}
    for line in path.read_text().splitlines():
        case = json.loads(line)
        kernels = {}
        for e in case["trace"]["traceEvents"]:
            if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
                kernels.setdefault(e["name"], []).append(round(e["dur"], 3))
        cases[case["case"]] = [{"kernel": name, "us": us} for name, us in kernels.items()]
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=pathlib.Path)
    parser.add_argument("--model", required=True, help="the device model these rows belong to, e.g. h100-sxm")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    machine = (args.run_dir / "machine.txt").read_text().splitlines()
    rows = {}
    for file in ("calibration.json", "steps.json", "amp.json"):
        path = args.run_dir / file
        if path.exists():
            found, _ = benchmark_rows(path, "tiny")
            rows.update(found)
    torch_path = args.run_dir / "torch_calibration.json"
    torch_peer = None
    if torch_path.exists():
        data = json.loads(torch_path.read_text())
        torch_peer = data["peer"]
        for name, row in data["rows"].items():
            rows[f"torch/{name}"] = row["us"]
    if not rows:
        sys.exit(f"no benchmark results in {args.run_dir}")
    date = machine[0][:10]
    gpu_line = machine[2] if len(machine) > 2 else ""
    out = {
        "model": args.model,
        "date": date,
        "machine": machine,
        "command": "bench/gpu/run.sh OUT_DIR; bench/gpu/collect.py OUT_DIR --model " + args.model,
        "peers": {"tiny": "bench/gpu/bench_calibration.cpp, bench_training_step, bench_half",
                  "torch": torch_peer},
        "unit": "us",
        "rows": {
            name: {"min": round(min(t), 4), "median": round(statistics.median(t), 4), "max": round(max(t), 4),
                   "repetitions": len(t)}
            for name, t in sorted(rows.items())
        },
    }
    target = args.out or pathlib.Path(__file__).resolve().parents[2] / "data" / "gpu_measurements" / \
        f"{args.model}-{date}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(rows)} rows from {gpu_line or 'the GPU'} -> {target}")
    choices_path = args.run_dir / "kernel_choices.jsonl"
    if choices_path.exists():
        choices = {key: out[key] for key in ("model", "date", "machine")}
        choices["command"] = "bench/gpu/on_device.sh OUT_DIR (kernel_choices OUT_DIR/kernel_choices.jsonl); " + \
            "bench/gpu/collect.py OUT_DIR --model " + args.model
        choices["unit"] = "us, per kernel, as CUPTI timed it (three calls per case after a warm-up)"
        choices["cases"] = kernel_choices(choices_path)
        kernels_target = target.with_name(target.stem + "-kernels.json")
        kernels_target.write_text(json.dumps(choices, indent=1) + "\n")
        print(f"{len(choices['cases'])} kernel-choice cases -> {kernels_target}")


if __name__ == "__main__":
    main()
