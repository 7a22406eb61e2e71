#!/usr/bin/env bash
# Compares tiny's training step with its GEMM floor, PyTorch eager and LibTorch,
# each peer "as shipped" and "tuned", in one run, and prints the table of
# docs/performance.md. Cases A/B/C: bench/training_cases.h.
#
#   bench/compare.sh [--rounds N] [--repetitions N] [--min-time S] [--cases ABC] [--stat median|min]
#                    [--markdown] [--json FILE]
# (defaults: 2 rounds x 3 runs of >= 0.5 s per program and case: about 3 minutes)
#
# Needs: tiny's build (build/default, or BUILD_DIR=...; `./workbook bench --compare`
# builds it first), Debian's python3-torch (/usr/bin/python3) and libtorch-dev.
# The LibTorch peer is a separate CMake project (bench/peers/libtorch/), configured
# and built here into build/peers/libtorch: it is not part of tiny's build, since
# LibTorch's headers compile slowly. OPENBLAS_CORETYPE is passed through unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build/default}
PYTHON=${PYTHON:-/usr/bin/python3}
TINY_BENCH="$BUILD_DIR/bench/bench_training_step"
PEERS_DIR=build/peers/libtorch

say() { printf 'compare: %s\n' "$*" >&2; }

[[ -x "$TINY_BENCH" ]] || { say "$TINY_BENCH not found: build tiny first (./workbook bench --compare does)"; exit 1; }
"$PYTHON" -c 'import torch' 2>/dev/null || { say "$PYTHON has no torch: apt-get install python3-torch"; exit 1; }

if [[ ! -f "$PEERS_DIR/build.ninja" ]]; then
  say "configuring the LibTorch peer into $PEERS_DIR"
  cmake -S bench/peers/libtorch -B "$PEERS_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
say "building the LibTorch peer"
cmake --build "$PEERS_DIR" >/dev/null

exec "$PYTHON" bench/peers/compare.py --tiny "$TINY_BENCH" --libtorch "$PEERS_DIR/bench_libtorch" \
  --torch-script bench/peers/bench_torch.py "$@"
