#!/usr/bin/env bash
# Two machines on one: tinyrun on "node 0" and "node 1", each in its own
# network namespace joined by a veth pair (10.77.0.1 <-> 10.77.0.2), 2 ranks
# per node. Proves that the three rendezvous (--rdzv tcp://node0:port served
# by node 0's tinyrun, redis:// on a Redis server in node 0's namespace, and
# file:// in a directory both nodes share) and Gloo's mesh work across hosts,
# not only over loopback, and that DDP training across the two nodes gives the
# same weights as the same 4 ranks on one node; then that a rank killed on
# node 1 is named on node 0 and both agents exit non-zero.
#
# usage: two_nodes.sh TINYRUN WORKER
# Needs root and iproute2 (ip netns); otherwise it skips (exit 77) saying why.
set -uo pipefail
TINYRUN=$1 WORKER=$2
skip() { echo "SKIP: $*"; exit 77; }
for f in "$TINYRUN" "$WORKER"; do [[ -x "$f" ]] || { echo "FAILED: $f is not an executable program"; exit 1; }; done
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (run the extended tier as root)"
command -v ip >/dev/null || skip "needs iproute2's ip"

tag=$$
ns0=tiny0_$tag ns1=tiny1_$tag v0=tv0_$tag v1=tv1_$tag
work=$(mktemp -d)
cleanup() {
  [[ -n "${redis_pid:-}" ]] && kill -9 "$redis_pid" 2>/dev/null
  ip netns pids "$ns0" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$ns1" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns0" && ip netns add "$ns1" || skip "cannot create network namespaces here (a container without CAP_SYS_ADMIN?)"
ip link add "$v0" type veth peer name "$v1" || skip "cannot create a veth pair here"
ip link set "$v0" netns "$ns0" && ip link set "$v1" netns "$ns1" || exit 1
ip -n "$ns0" addr add 10.77.0.1/24 dev "$v0" && ip -n "$ns1" addr add 10.77.0.2/24 dev "$v1" || exit 1
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$v0" up && ip -n "$ns1" link set "$v1" up || exit 1

fail=0
check() {  # check NAME CONDITION-DESCRIPTION COMMAND...
  local name=$1 what=$2; shift 2
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}

# run RDZV SCENARIO...: both nodes' tinyrun at once; output in $work/node{0,1}.log.
run() {
  local rdzv=$1; shift
  # Each node's ranks bind Gloo to their own veth (there is no shared hostname).
  GLOO_SOCKET_IFNAME=$v0 TINY_NUM_THREADS=1 timeout 60 ip netns exec "$ns0" "$TINYRUN" --nproc-per-node 2 --nnodes 2 \
    --node-rank 0 --rdzv "$rdzv" --timeout 5 "$WORKER" "$@" >"$work/node0.log" 2>&1 &
  local p0=$!
  GLOO_SOCKET_IFNAME=$v1 TINY_NUM_THREADS=1 timeout 60 ip netns exec "$ns1" "$TINYRUN" --nproc-per-node 2 --nnodes 2 \
    --node-rank 1 --rdzv "$rdzv" --timeout 5 "$WORKER" "$@" >"$work/node1.log" 2>&1 &
  local p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
  echo "--- node 0"; cat "$work/node0.log"; echo "--- node 1"; cat "$work/node1.log"
}

run "tcp://10.77.0.1:29611" collectives cpu
check ok "both nodes exit 0 (node 0: $rc0, node 1: $rc1)" test $rc0 -eq 0 -a $rc1 -eq 0
for r in 0 1 2 3; do
  node=$((r / 2))
  check ok "rank $r ran its collectives on node $node" grep -q "^\[rank$r\]: collectives ok" "$work/node$node.log"
done

# DDP training: 4 ranks on one node (loopback) first, then across the two nodes through each rendezvous.
TINY_NUM_THREADS=1 timeout 60 "$TINYRUN" --nproc-per-node 4 --timeout 5 "$WORKER" ddp cpu "$work/one_node.bin" \
  >"$work/one_node.log" 2>&1 || cat "$work/one_node.log"
check ok "DDP on one node with 4 ranks wrote its weights" test -s "$work/one_node.bin"
same_weights() {  # same_weights HOW
  check ok "DDP across two nodes through $1: both exit 0 (node 0: $rc0, node 1: $rc1)" test $rc0 -eq 0 -a $rc1 -eq 0
  check ok "DDP across two nodes through $1: the weights equal the one-node run's" cmp -s "$work/one_node.bin" "$work/two_nodes.bin"
  rm -f "$work/two_nodes.bin"
}
run "tcp://10.77.0.1:29613" ddp cpu "$work/two_nodes.bin"
same_weights "tinyrun's TCP store"

if command -v redis-server >/dev/null; then
  # Protected mode off: this server is reached from the other "machine" (and lives in a private namespace).
  ip netns exec "$ns0" redis-server --bind 10.77.0.1 --port 29614 --protected-mode no --save "" --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do
    ip netns exec "$ns1" bash -c 'exec 3<>/dev/tcp/10.77.0.1/29614' 2>/dev/null && break
    sleep 0.05
  done
  run "redis://10.77.0.1:29614/two_nodes_$tag" ddp cpu "$work/two_nodes.bin"
  same_weights "a Redis server on node 0"
  kill "$redis_pid"; wait "$redis_pid" 2>/dev/null; redis_pid=
else
  echo "not tried: redis:// (redis-server is not installed: apt-get install redis-server)"
fi

mkdir -p "$work/shared"
run "file://$work/shared/rdzv" ddp cpu "$work/two_nodes.bin"
same_weights "a directory both nodes share"

run "tcp://10.77.0.1:29612" die
check ok "both agents exit non-zero (node 0: $rc0, node 1: $rc1)" test $rc0 -ne 0 -a $rc1 -ne 0 -a $rc0 -ne 124 -a $rc1 -ne 124
check ok "node 1's agent names rank 3" grep -q "rank 3" "$work/node1.log"
check ok "node 0's ranks say a rank is gone" grep -q "is gone\|are gone\|did not answer\|did not reach" "$work/node0.log"
exit $fail
