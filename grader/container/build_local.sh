#!/usr/bin/env bash
# Builds grader/container/Dockerfile on a Debian machine that reaches Debian's
# package mirror but no container registry (so no `FROM debian:12` from Docker
# Hub), and grades submissions in the image:
#
#   1. a Debian 12 base made with debootstrap (--variant=minbase) from the
#      machine's own mirror, imported as localhost/debian:12;
#   2. the image (localhost/gpu-workbook-grader), built with buildah from the
#      repository with --build-arg BASE=localhost/debian:12;
#   3. smoke runs in it (podman), as grader/README.md's `docker run` does:
#      the untouched stubs must score zero, the reference solutions (laid out
#      as a submission) full marks, and Gradescope's route (a .tar.gz of the
#      solutions as /autograder/submission, /autograder/run_autograder) a
#      results.json with every test passed.
#
#   sudo grader/container/build_local.sh [--dir DIR] [--mirror URL] [--jobs N]
#                                        [--smoke none|stubs|all] [--rebuild-base] [--skip-build]
#
# As root (debootstrap and rootful podman need it). Installs buildah, podman,
# runc and debootstrap with apt when missing. DIR (default
# /var/lib/workbook-container) holds the base's root file system, the
# container storage and the smoke runs' outputs: a few GB. Prints the time of
# each step and the image's size. Exits non-zero when a step or a smoke run's
# grade is not what it should be. --skip-build grades in the image built
# before (the build's layers are kept: a rebuild with the same packages starts
# at the repository's copy).
set -euo pipefail

dir=/var/lib/workbook-container
mirror=
jobs=2
smoke=all
rebuild_base=0
skip_build=0
usage() { sed -n '/^#   sudo/,/skip-build\]/p' "$0" | sed 's/^#  *//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --smoke) smoke=${2:?--smoke needs none, stubs or all}; shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    --skip-build) skip_build=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build_local.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "build_local.sh: --jobs must be a positive number, got '$jobs'" >&2; exit 2; }
[[ "$smoke" =~ ^(none|stubs|all)$ ]] || { echo "build_local.sh: --smoke must be none, stubs or all, got '$smoke'" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "build_local.sh: run it as root (debootstrap and rootful podman need it): sudo $0 $*" >&2; exit 2; }

say() { printf 'build_local: %s\n' "$*" >&2; }
die() { printf 'build_local: FAILED: %s\n' "$*" >&2; exit 1; }
source_dir=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
base=localhost/debian:12
image=localhost/gpu-workbook-grader

missing=()
for tool in buildah:buildah podman:podman runc:runc debootstrap:debootstrap; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$dir"
# The container storage lives in DIR, not in /var/lib/containers; overlay
# where the kernel allows it, vfs (a full copy per layer: slower, larger)
# where it does not (overlay on overlay).
storage_driver=overlay
probe=$(mktemp -d "$dir/overlay-probe.XXXXXX")
mkdir -p "$probe"/{l,u,w,m}
if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
  umount "$probe/m"
else
  storage_driver=vfs
fi
rm -rf "$probe"
store=(--root "$dir/storage" --runroot "$dir/run" --storage-driver "$storage_driver")
# runc, not crun (podman's default on Debian 12): crun refuses a machine whose
# cgroups are in hybrid mode (v1 controllers beside a v2 hierarchy with one).
# The open-files and process limits are passed at the machine's own hard
# limits: podman's defaults (nofile 1048576) cannot be set without
# CAP_SYS_RESOURCE, which a machine that is itself a container may lack.
nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
[[ "$nofile" == unlimited || "$nofile" -gt 1048576 ]] && nofile=1048576
[[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
podman_() { podman "${store[@]}" --runtime runc "$@"; }

# ------------------------------------------------------------ 1. the base
if [[ $rebuild_base -eq 1 ]] || ! podman_ image exists "$base"; then
  if [[ -z "$mirror" ]]; then
    # The machine's own Debian mirror: the first URIs: (deb822) or deb line naming .../debian.
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
             grep -oE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]*/debian/?([[:space:]]|$)' |
             grep -oE '[a-z]+://[^[:space:]]*' | head -1 || true)
    [[ -n "$mirror" ]] || die "no Debian mirror in /etc/apt/sources.list*: name one with --mirror URL (for example http://deb.debian.org/debian)"
  fi
  rootfs=$dir/rootfs
  say "1. a Debian 12 base from $mirror (debootstrap --variant=minbase into $rootfs)"
  t0=$SECONDS
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$dir/debootstrap.log" 2>&1 ||
    { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed (its log: $dir/debootstrap.log)"; }
  # The sources of Docker's debian:12: the release, its updates and security.
  security=${mirror%/debian*}/debian-security
  rm -f "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --numeric-owner -c . | podman_ import --change 'CMD ["bash"]' - "$base" >> "$dir/debootstrap.log" 2>&1 ||
    die "podman could not import the base (its log: $dir/debootstrap.log)"
  rm -rf "$rootfs"
  say "   base $base imported in $((SECONDS - t0)) s"
else
  say "1. the base $base is there already (--rebuild-base makes it again)"
fi

# ------------------------------------------------------------ 2. the image
if [[ $skip_build -eq 1 ]] && podman_ image exists "$image"; then
  say "2. --skip-build: grading in the image $image built before"
else
  say "2. building $image from $source_dir (buildah, $jobs compiler jobs, storage $storage_driver in $dir)"
  t0=$SECONDS
  # --isolation chroot: the RUN steps need no OCI runtime (and no cgroups).
  # --layers: the package layer is kept for the next build.
  nice -n 10 buildah "${store[@]}" bud --isolation chroot --layers "${limits[@]}" \
    --build-arg "BASE=$base" --build-arg "CMAKE_BUILD_PARALLEL_LEVEL=$jobs" \
    -f "$source_dir/grader/container/Dockerfile" --ignorefile "$source_dir/grader/container/Dockerfile.dockerignore" \
    -t "$image" "$source_dir" > "$dir/build.log" 2>&1 ||
    { tail -30 "$dir/build.log" >&2; die "the image did not build (its log: $dir/build.log)"; }
  say "   built in $((SECONDS - t0)) s"
fi
size=$(podman_ image inspect --format '{{.Size}}' "$image")
base_size=$(podman_ image inspect --format '{{.Size}}' "$base")
say "   the image is $((size / 1000000)) MB, $((base_size / 1000000)) MB of it the base"

# ------------------------------------------------------------ 3. smoke runs
[[ "$smoke" != none ]] || exit 0
# As grader/README.md's `docker run`: no network, CAP_SYS_ADMIN for the
# sandbox's namespaces (without it: no network, mount or PID namespace, and
# --require-sandbox refuses), CAP_NET_ADMIN for the loopback of the run's
# network namespace (without it lesson 6 cannot meet on 127.0.0.1), no
# AppArmor profile.
run_opts=(--rm --network none --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt apparmor=unconfined "${limits[@]}")
out=$dir/smoke
rm -rf "$out"; mkdir -p "$out"
smoke_run() {  # smoke_run NAME COMMAND...: runs the image, keeps its output in $out/NAME.log
  local name=$1; shift
  local t0=$SECONDS
  if podman_ run "${run_opts[@]}" -v "$out:/out" "$image" "$@" > "$out/$name.log" 2>&1; then
    say "   $name: ok in $((SECONDS - t0)) s ($out/$name.log)"
  else
    tail -30 "$out/$name.log" >&2
    die "$name (its log: $out/$name.log)"
  fi
}
say "3. grading in the image"
# The stubs, generated in the image from the solutions (as dev.stubs_get_zero does).
podman_ run "${run_opts[@]}" -v "$out:/out" --entrypoint /bin/sh "$image" \
  -c '"$WORKBOOK_GRADER" stubs --out /out/stubs >/dev/null' ||
  die "the grader in the image could not write the stubs"
smoke_run stubs grade --submission /out/stubs --no-timing --expect zero --json /out/stubs.json
[[ "$smoke" == all ]] || exit 0
smoke_run solutions grade --submission /autograder/source/solutions --expect full --json /out/solutions.json
# Gradescope's route: the submission a .tar.gz, as a student uploads it.
mkdir -p "$out/gradescope/submission" "$out/gradescope/results"
# The solutions' folder by the name a student's has (the grader takes nothing
# under a folder named solutions/).
tar -C "$source_dir" --transform 's,^solutions,lessons,' -czf "$out/gradescope/submission/lessons.tar.gz" solutions
t0=$SECONDS
podman_ run "${run_opts[@]}" -v "$out/gradescope/submission:/autograder/submission:ro" \
  -v "$out/gradescope/results:/autograder/results" --entrypoint /autograder/run_autograder "$image" \
  > "$out/gradescope.log" 2>&1 || { tail -30 "$out/gradescope.log" >&2; die "run_autograder failed (its log: $out/gradescope.log)"; }
results=$out/gradescope/results/results.json
[[ -s "$results" ]] || die "run_autograder wrote no $results"
verdict=$(python3 - "$results" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
tests = r.get("tests", [])
full = sum(t.get("max_score", 0) for t in tests)
failed = [t["name"] for t in tests if t.get("status") != "passed"]
print(f"{r.get('score')} of {full}, {len(tests)} tests, failed: {', '.join(failed) or 'none'}")
sys.exit(0 if tests and not failed and abs(r.get("score", 0) - full) < 1e-9 else 1)
EOF
) || die "Gradescope's results.json is not full marks: $verdict ($results)"
say "   gradescope: ok in $((SECONDS - t0)) s, results.json: $verdict"
