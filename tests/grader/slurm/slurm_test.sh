#!/usr/bin/env bash
# Issue 20 item 4 for real: a single-node SLURM (Debian's slurm-wlm: slurmctld
# and slurmd on localhost, munge) started in a temporary folder, a class of
# three lesson-1 submissions graded by grader/slurm/grade_array.sbatch as a
# two-task array, merged by a job that depends on it (afterok), and the merged
# gradebook compared with the same class graded in one batch (all but the
# "seconds" column, the only one that may differ: each run's own time).
# Needs root and slurm-wlm; says why and exits 77 (CTest: skipped) otherwise.
# Only the daemons it started are stopped, by their PIDs.
#   slurm_test.sh GRADER RECIPE SOURCE
set -uo pipefail
grader=$1 recipe=$2 source=$3
skip() { echo "skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "the SLURM test runs slurmctld, slurmd and munged as root (run ctest as root, as CI does)"
for p in slurmctld slurmd munged sbatch squeue scontrol; do
  command -v "$p" >/dev/null || skip "$p is not installed: apt-get install -y slurm-wlm munge (./workbook test --extended installs them)"
done

t=$(mktemp -d /tmp/workbook-slurm-XXXXXX)
chmod 755 "$t"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$t"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*"
  for f in "$t"/*.log "$t"/out/*.txt; do [[ -f "$f" ]] && { echo "--- $f"; tail -30 "$f"; }; done
  exit 1
}

# ---- munge, on a socket of its own
dd if=/dev/urandom of="$t/munge.key" bs=1024 count=1 status=none
chmod 400 "$t/munge.key"
mkdir -m 700 "$t/munge"
munged --force --key-file="$t/munge.key" --socket="$t/munge/munge.socket" --pid-file="$t/munge/munged.pid" \
  --log-file="$t/munged.log" --seed-file="$t/munge/seed" || fail "munged did not start"
for _ in $(seq 50); do [[ -s "$t/munge/munged.pid" ]] && break; sleep 0.1; done
pids+=("$(cat "$t/munge/munged.pid")")

# ---- slurm.conf for this machine alone, on ports no other SLURM uses
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
mkdir -p "$t/state" "$t/spool" "$t/out"
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat > "$t/slurm.conf" <<CONF
ClusterName=workbooktest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$t/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.pid
SlurmctldLogFile=$t/slurmctld.log
SlurmdLogFile=$t/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=grading Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$t/slurm.conf
slurmctld -D -f "$t/slurm.conf" > "$t/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$t/slurm.conf" -N "$host" > "$t/slurmd.out.log" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
  sleep 0.5
done
[[ $up -eq 1 ]] || fail "the SLURM node did not come up in 30 s: $(sinfo 2>&1)"
echo "SLURM up: $(sinfo -h -o '%P %T %c CPUs' 2>&1)"

# ---- a class of three: the solution twice (one nested deeper), the stubs
lesson=1_device_check
mkdir -p "$t/class/alice/$lesson" "$t/class/bob/lessons/$lesson" "$t/class/carol/$lesson"
cp "$source/solutions/$lesson/exercise.cpp" "$t/class/alice/$lesson/"
cp "$source/solutions/$lesson/exercise.cpp" "$t/class/bob/lessons/$lesson/"
cp "$source/lessons/$lesson/exercise.cpp" "$t/class/carol/$lesson/"

# ---- the array (two parts) and the merge that waits for it
export WORKBOOK_GRADER=$grader WORKBOOK_SEED=7
job=$(sbatch --parsable --array=0-1 --cpus-per-task=1 --mem=2G --chdir="$t" --output="$t/out/task-%a.txt" \
  "$source/grader/slurm/grade_array.sbatch" "$t/class" "$t/out" 1 --unsafe 2>&1) || fail "sbatch refused the array: $job"
merge=$(sbatch --parsable --dependency="afterok:$job" --chdir="$t" --output="$t/out/merge.txt" \
  --wrap "'$grader' grade merge '$t/out/shard-0' '$t/out/shard-1' --out '$t/out/class'" 2>&1) ||
  fail "sbatch refused the merge: $merge"
echo "array job $job, merge job $merge (afterok)"
# Meanwhile, the same class in one batch, for the comparison.
"$grader" grade 1 --batch "$t/class" --out "$t/whole" --seed 7 --jobs 1 --unsafe > "$t/whole.log" 2>&1 ||
  fail "the unsharded batch failed"
done=0
for _ in $(seq 240); do
  if [[ -z "$(squeue -h -j "$job,$merge" 2>/dev/null)" ]]; then done=1; break; fi
  sleep 0.5
done
[[ $done -eq 1 ]] || fail "the jobs did not finish in 120 s: $(squeue 2>&1)"
for j in "$job" "$merge"; do
  state=$(scontrol show job "$j" 2>&1 | grep -o 'JobState=[A-Z_]*' | sort -u | tr '\n' ' ')
  [[ "$state" == "JobState=COMPLETED " ]] || fail "job $j ended as: $state"
done
for i in 0 1; do
  [[ -f "$t/out/shard-$i/shard.json" ]] || fail "task $i wrote no shard.json"
  grep -q "\"index\": $i" "$t/out/shard-$i/shard.json" || fail "task $i did not grade part $i: $(cat "$t/out/shard-$i/shard.json")"
  # The part came from the array task's own variables: the script passes no --shard.
  grep -q "\"source\": \"SLURM_ARRAY_TASK_ID=$i, SLURM_ARRAY_TASK_COUNT=2\"" "$t/out/shard-$i/shard.json" ||
    fail "task $i did not take its part from SLURM_ARRAY_TASK_ID: $(cat "$t/out/shard-$i/shard.json")"
done
# Part 0/2 is alice and carol, part 1/2 bob (the split of the sorted names).
grep -q '^"alice"' "$t/out/shard-0/gradebook.csv" && grep -q '^"carol"' "$t/out/shard-0/gradebook.csv" &&
  grep -q '^"bob"' "$t/out/shard-1/gradebook.csv" || fail "the parts are not the split of alice, bob, carol in two"
# The merged gradebook is the unsharded one, but for each run's own seconds (column 6).
no_seconds() { sed -E 's/^("([^"]|"")*",[^,]*,[^,]*,[^,]*,[^,]*,)[^,]*,/\1(seconds),/' "$1"; }
if ! diff <(no_seconds "$t/whole/gradebook.csv") <(no_seconds "$t/out/class/gradebook.csv"); then
  fail "the merged gradebook differs from the unsharded one (above; < unsharded, > merged)"
fi
[[ $(wc -l < "$t/out/class/gradebook.csv") -eq 4 ]] || fail "the merged gradebook has not 3 rows"
grep -q 'href="bob/report.html"' "$t/out/class/index.html" || fail "the merged index.html does not link bob's report"
[[ -f "$t/out/class/bob/report.html" ]] || fail "bob's report was not copied beside the merged index.html"
grep -q "the class: 3 submissions" "$t/out/merge.txt" || fail "the merge job printed no class table"
echo "the merged gradebook equals the unsharded one:"
cat "$t/out/class/gradebook.csv"
echo "passed: a two-task SLURM array and its afterok merge graded the class as one batch does"
