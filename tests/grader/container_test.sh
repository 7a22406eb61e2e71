#!/usr/bin/env bash
# grader/container/Dockerfile installs ./workbook's own package list, so the
# image and the script cannot drift: the list its RUN line reads out of
# ./workbook (with the Dockerfile's own sed) is the one ./workbook checks
# (REQUIRED_PACKAGES, every name of it), and the Dockerfile installs no package
# named by hand. With WORKBOOK_DOCKER_BUILD=1 it also builds the image and
# grades the stubs in it (many minutes; off by default): with Docker where a
# daemon answers, else as root with grader/container/build_local.sh (a
# debootstrap base, buildah, podman; WORKBOOK_CONTAINER_DIR is its --dir).
#   container_test.sh SOURCE
set -euo pipefail
source_dir=$1
dockerfile=$source_dir/grader/container/Dockerfile
fail() { echo "FAILED: $*"; exit 1; }
# The sed expression the Dockerfile runs on the script.
expr=$(grep -o "sed -n '[^']*' /tmp/workbook-packages" "$dockerfile" | sed -E "s/^sed -n '([^']*)'.*/\1/")
[[ -n "$expr" ]] || fail "the Dockerfile does not read REQUIRED_PACKAGES out of ./workbook (no sed -n '...' /tmp/workbook-packages)"
from_docker=$(bash -c 'eval "$(sed -n "$1" "$2")"; printf "%s\n" "${REQUIRED_PACKAGES[@]}"' _ "$expr" "$source_dir/workbook")
# ./workbook's own list: its assignment, parsed by bash up to the closing parenthesis wherever it falls.
from_workbook=$(bash -c 'src=$(cat "$1"); src=${src#*$'"'"'\nREQUIRED_PACKAGES=('"'"'}; eval "REQUIRED_PACKAGES=(${src%%)*})"; printf "%s\n" "${REQUIRED_PACKAGES[@]}"' _ "$source_dir/workbook")
[[ -n "$from_workbook" ]] || fail "./workbook defines no REQUIRED_PACKAGES"
if [[ "$from_docker" != "$from_workbook" ]]; then
  diff <(echo "$from_workbook") <(echo "$from_docker") || true
  fail "the Dockerfile's package list differs from ./workbook's (< ./workbook, > the Dockerfile's)"
fi
grep -q 'ensure_packages "${REQUIRED_PACKAGES\[@\]}"' "$source_dir/workbook" ||
  fail "./workbook no longer installs REQUIRED_PACKAGES: update the Dockerfile to its new list"
if grep -E 'apt-get install' "$dockerfile" | grep -vq 'REQUIRED_PACKAGES'; then
  fail "the Dockerfile installs packages by name: add them to ./workbook's REQUIRED_PACKAGES instead"
fi
echo "the Dockerfile installs ./workbook's $(wc -l <<<"$from_workbook") packages: $(tr '\n' ' ' <<<"$from_workbook")"
if [[ "${WORKBOOK_DOCKER_BUILD:-0}" == 1 ]]; then
  if docker info >/dev/null 2>&1; then
    docker build -f "$dockerfile" -t gpu-workbook-grader "$source_dir"
    docker run --rm --network none --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt apparmor=unconfined gpu-workbook-grader \
      grade 1 --submission /autograder/source/lessons --expect zero
  elif [[ $(id -u) -eq 0 ]]; then
    "$source_dir/grader/container/build_local.sh" --dir "${WORKBOOK_CONTAINER_DIR:-/var/lib/workbook-container}" --smoke stubs
  else
    fail "WORKBOOK_DOCKER_BUILD=1 but no Docker daemon answers, and grader/container/build_local.sh (buildah and podman, no daemon) needs root"
  fi
fi
