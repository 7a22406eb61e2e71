#!/usr/bin/env bash
# Two machines on one: tinyrun on "node 0" and "node 1", each in its own
# network namespace joined by a veth pair (10.77.0.1 <-> 10.77.0.2), 2 ranks
# per node. Proves that the rendezvous (--rdzv tcp://node0:port), the TCP
# store and Gloo's mesh work across hosts, not only over loopback; then that
# a rank killed on node 1 is named on node 0 and both agents exit non-zero.
#
# usage: two_nodes.sh TINYRUN WORKER
# Needs root and iproute2 (ip netns); otherwise it skips (exit 77) saying why.
set -uo pipefail
TINYRUN=$1 WORKER=$2
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (run the extended tier as root)"
command -v ip >/dev/null || skip "needs iproute2's ip"

tag=$$
ns0=tiny0_$tag ns1=tiny1_$tag v0=tv0_$tag v1=tv1_$tag
work=$(mktemp -d)
cleanup() {
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

# run SCENARIO PORT: both nodes' tinyrun at once; output in $work/node{0,1}.log.
run() {
  local scenario=$1 port=$2
  # Each node's ranks bind Gloo to their own veth (there is no shared hostname).
  GLOO_SOCKET_IFNAME=$v0 timeout 60 ip netns exec "$ns0" "$TINYRUN" --nproc-per-node 2 --nnodes 2 --node-rank 0 \
    --rdzv "tcp://10.77.0.1:$port" --timeout 5 "$WORKER" $scenario >"$work/node0.log" 2>&1 &
  local p0=$!
  GLOO_SOCKET_IFNAME=$v1 timeout 60 ip netns exec "$ns1" "$TINYRUN" --nproc-per-node 2 --nnodes 2 --node-rank 1 \
    --rdzv "tcp://10.77.0.1:$port" --timeout 5 "$WORKER" $scenario >"$work/node1.log" 2>&1 &
  local p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
}

run "collectives cpu" 29611
echo "--- node 0"; cat "$work/node0.log"; echo "--- node 1"; cat "$work/node1.log"
check ok "both nodes exit 0 (node 0: $rc0, node 1: $rc1)" test $rc0 -eq 0 -a $rc1 -eq 0
for r in 0 1 2 3; do
  node=$((r / 2))
  check ok "rank $r ran its collectives on node $node" grep -q "^\[rank$r\]: collectives ok" "$work/node$node.log"
done

# A rank dies on node 1 (the last rank, 3, is killed mid-step): node 0's ranks name a gone rank, nobody hangs.
run "die" 29612
echo "--- node 0"; cat "$work/node0.log"; echo "--- node 1"; cat "$work/node1.log"
check ok "both agents exit non-zero (node 0: $rc0, node 1: $rc1)" test $rc0 -ne 0 -a $rc1 -ne 0 -a $rc0 -ne 124 -a $rc1 -ne 124
check ok "node 1's agent names rank 3" grep -q "rank 3" "$work/node1.log"
check ok "node 0's ranks say a rank is gone" grep -q "is gone\|are gone\|did not answer\|did not reach" "$work/node0.log"
exit $fail
