#!/usr/bin/env bash
# Stops the test cluster of hack/cluster/up.sh and removes what it made: its processes, the
# pods' containers and shims, mounts under CLUSTER_DIR, the pods' network namespaces, and the
# iptables rules and ipsets of kube-proxy, kube-router and up.sh. Safe to run
# when nothing is up, and after a crash or a reboot left only parts.
set -uo pipefail
D=${CLUSTER_DIR:-/var/lib/managed-agents-cluster}
log() { printf 'cluster-down: %s\n' "$*" >&2; }
[ -d "$D" ] || exit 0

# The kubelet first, so it does not restart what goes next; then the rest.
for name in kubelet kube-router kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
  pidfile=$D/run/$name.pid
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done

# The pods' processes: every shim of this containerd, with its container processes.
sock=$D/containerd/containerd.sock
if [ -S "$sock" ] && [ -f "$D/run/containerd.pid" ] && kill -0 "$(cat "$D/run/containerd.pid")" 2>/dev/null; then
  for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
fi
for pid in $(pgrep -f "containerd-shim.*-address $sock" 2>/dev/null); do
  pkill -9 -P "$pid" 2>/dev/null || true
  kill -9 "$pid" 2>/dev/null || true
done
if [ -f "$D/run/containerd.pid" ]; then
  kill "$(cat "$D/run/containerd.pid")" 2>/dev/null || true
  sleep 1
  kill -9 "$(cat "$D/run/containerd.pid")" 2>/dev/null || true
  rm -f "$D/run/containerd.pid"
fi

# Network: the pods' namespaces (their veths go with them), then the rules.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
ip route del unreachable 10.88.0.0/16 2>/dev/null || true
if [ -x "$D/bin/kube-proxy" ]; then "$D/bin/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
if [ -x "$D/bin/kube-router" ]; then "$D/bin/kube-router" --cleanup-config >/dev/null 2>&1 || true; fi
while iptables -S FORWARD 2>/dev/null | grep -q 'managed-agents-cluster'; do
  rule=$(iptables -S FORWARD | grep -m1 'managed-agents-cluster' | sed 's/^-A /-D /')
  # shellcheck disable=SC2086 # the rule's words are iptables arguments.
  iptables $rule || break
done

# Mounts under the state directory, deepest first.
grep -o " $D/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done

# Everything but the state that is worth keeping between runs: nothing is.
rm -rf "$D"
log "stopped and removed $D"
