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
# kube-router's own --cleanup-config leaves its policy chains (and then panics on IPVS), and
# the kubelet leaves KUBE-FIREWALL and its canaries: they go by name, in every table (the
# kubelet's only when no other kubelet runs here): the jumps into them, then the chains.
ours='KUBE-(ROUTER-|POD-FW-|NWPLCY-)'
pgrep -x kubelet >/dev/null || ours='KUBE-(ROUTER-|POD-FW-|NWPLCY-|FIREWALL$|KUBELET-CANARY$|IPTABLES-HINT$)'
for ipt in iptables ip6tables; do
  for table in filter nat mangle; do
    chains=$("$ipt" -t "$table" -S 2>/dev/null | awk -v re="^$ours" '$1 == "-N" && $2 ~ re {print $2}')
    [ -n "$chains" ] || continue
    for c in $chains; do
      "$ipt" -t "$table" -S 2>/dev/null | grep -E -- "-j $c( |$)" | grep -v "^-A $c " | sed 's/^-A /-D /' |
        while read -r rule; do
          # shellcheck disable=SC2086 # the rule's words are iptables arguments.
          eval "$ipt" -t "$table" $rule 2>/dev/null || true
        done
    done
    for c in $chains; do "$ipt" -t "$table" -F "$c" 2>/dev/null || true; done
    for c in $chains; do "$ipt" -t "$table" -X "$c" 2>/dev/null || true; done
  done
done
if command -v ipset >/dev/null; then
  for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-'); do ipset destroy "$set" 2>/dev/null || true; done
fi
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
