#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run bench/gpu/on_device.sh, into .gpu/
# (git-ignored through .git/info/exclude; name it in the device tool's carry).
#
#   bench/gpu/pack.sh            (BUILD_DIR, default build/default: a CUDA build
#                                 configured with -DCMAKE_CUDA_ARCHITECTURES=90)
#
# The lent machines have CUDA, CMake and PyTorch but none of Debian's
# GoogleTest, Google Benchmark, OpenBLAS or Gloo, and cannot download them, so
# the build happens here and travels: the GPU test and benchmark programs, the
# lessons' demos, libtiny, the CTest files (ctest -L gpu runs there from the
# same absolute paths), and every shared library they load except the C
# library's, libstdc++'s and the GPU driver's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
cd "$ROOT"
grep -q 'CMAKE_CUDA_ARCHITECTURES[^=]*=.*90' "$BUILD_DIR/CMakeCache.txt" ||
  { echo "pack.sh: $BUILD_DIR is not built for architecture 90 (H100/H200): cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90" >&2; exit 1; }
programs=(tests/tiny_gpu_tests tests/tiny_dist_worker framework/libtiny.so
          bench/bench_calibration bench/bench_training_step bench/bench_half bench/kernel_choices
          framework/examples/train_mlp)
for n in 2 4 7; do programs+=("tests/lessons/solution_${n}_demo"); done
rel=$(realpath --relative-to="$ROOT" "$BUILD_DIR")
files=()
for p in "${programs[@]}"; do
  [[ -f "$BUILD_DIR/$p" ]] || { echo "pack.sh: $BUILD_DIR/$p is missing: build it first" >&2; exit 1; }
  files+=("$rel/$p")
done
while IFS= read -r f; do files+=("$f"); done < <(cd "$ROOT" && find "$rel" -name CTestTestfile.cmake -o -name '*_tests.cmake' -o -name '*_include.cmake' | grep -v CMakeFiles)
rm -rf .gpu && mkdir -p .gpu/lib
{ ldd "${programs[@]/#/$BUILD_DIR/}" || true; } | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libnvidia[^/]*|ld-linux[^/]*)\.so' |
  { grep -v "$BUILD_DIR" || true; } | xargs -r cp -L -t .gpu/lib
tar cJf .gpu/pack.tar.xz "${files[@]}"
tar cJf .gpu/libs.tar.xz -C .gpu lib && rm -rf .gpu/lib
du -sh .gpu/*
