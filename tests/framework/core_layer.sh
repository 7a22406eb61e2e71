#!/usr/bin/env bash
# Core depends on nothing above it (issue 22, docs/architecture.md): every
# quoted include in framework/src/core names core itself, the kernels and host
# runtime below it, or a public header of core's own types; and those public
# headers include only each other. A GPU, an op, autograd or a backend reaches
# core by registering with it (core/device_hooks.h), never by being included.
# Usage: core_layer.sh FRAMEWORK_DIR
set -u
framework=${1:?usage: core_layer.sh FRAMEWORK_DIR}

# The public headers that make up core's types.
core_public="tensor device dtype error half scalar generator state_dict thread_local_state matmul_precision"

allowed() {  # allowed INCLUDE: 0 when core may include it
  case "$1" in
    core/* | kernels/* | runtime/*) return 0 ;;
  esac
  for h in $core_public; do
    [[ "$1" == "tiny/$h.h" ]] && return 0
  done
  return 1
}

check_tree() {  # check_tree FRAMEWORK_DIR: prints each upward include, returns 1 if any
  local dir=$1 bad=0 file line include
  local files=("$dir"/src/core/*.h "$dir"/src/core/*.cpp)
  for h in $core_public; do files+=("$dir/include/tiny/$h.h"); done
  for file in "${files[@]}"; do
    [[ -f "$file" ]] || { echo "missing: $file"; bad=1; continue; }
    while IFS= read -r line; do
      include=${line#*\"}
      include=${include%%\"*}
      if ! allowed "$include"; then
        echo "${file#"$dir"/}: #include \"$include\" reaches above core"
        bad=1
      fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file")
  done
  return $bad
}

# The check must be able to fail: a made-up core file that reaches up is refused.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/src/core" "$fake/include/tiny"
for h in $core_public; do : > "$fake/include/tiny/$h.h"; done
printf '#include "core/tensor_impl.h"\n#include "gpu/device_context.h"\n' > "$fake/src/core/storage.cpp"
if check_tree "$fake" > "$fake/out"; then
  echo "FAIL: the check let core/storage.cpp include gpu/device_context.h"
  exit 1
fi
grep -q 'gpu/device_context.h' "$fake/out" || { echo "FAIL: the refusal did not name the include"; cat "$fake/out"; exit 1; }

if ! check_tree "$framework"; then
  echo "FAIL: core must not include a higher layer; register with core instead (core/device_hooks.h)"
  exit 1
fi
echo "ok: framework/src/core includes only core, kernels, the host runtime and core's public headers"
