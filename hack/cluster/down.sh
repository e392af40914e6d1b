#!/usr/bin/env bash
# Stops the test cluster of hack/cluster/up.sh and removes what it made: its processes (the
# control plane, kube-router and agent-sandbox's controller among them), the pods' containers
# and shims, mounts under CLUSTER_DIR, the pods' network namespaces, and the iptables rules and
# ipsets of kube-proxy, kube-router and up.sh. Safe to run when nothing is up, and after a crash
# or a reboot left only parts.
set -uo pipefail
D=${CLUSTER_DIR:-/var/lib/managed-agents-cluster}
log() { printf 'cluster-down: %s\n' "$*" >&2; }
[[ $D == /?* ]] || { log "CLUSTER_DIR=$D: want an absolute path"; exit 1; }
made_by_up() { # the marker, or (before it existed) the cluster's own CA
  [ -e "$D/.managed-agents-cluster" ] ||
    openssl x509 -in "$D/pki/ca.crt" -noout -subject 2>/dev/null | grep managed-agents-test-cluster-ca >/dev/null
}
if [ -d "$D" ] && ! made_by_up; then
  log "$D was not made by hack/cluster/up.sh (no .managed-agents-cluster marker): leaving it alone"
  exit 1
fi

# stop NAME: the pid in the pidfile, only if it is still NAME's binary from this cluster (the
# pidfiles outlive a reboot; a pid may be another process's by now).
stop() {
  local name=$1 pidfile=$D/run/$1.pid pid exe
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  if [ -n "$exe" ] && [ "$(basename "$exe")" = "$(basename "$(readlink -f "$D/bin/$name" 2>/dev/null || echo "$name")")" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# The kubelet first, so it does not restart what goes next; then the rest.
for name in kubelet agent-sandbox-controller kube-router kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
  stop "$name"
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
stop containerd

# Network: the pods' namespaces (their veths go with them), then the rules.
# (Not while another kubelet runs here: its pods' namespaces are named the same way.)
if ! pgrep -x kubelet >/dev/null; then
  for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do
    ip netns delete "$ns" 2>/dev/null || true
    # A name whose namespace is already gone is a plain file that `ip netns delete` keeps.
    if [ -f "/run/netns/$ns" ] && ! mountpoint -q "/run/netns/$ns"; then rm -f "/run/netns/$ns"; fi
  done
fi
# A pod's host-side veth goes with its namespace, unless something still held the namespace:
# then the veth and its /32 route stay, and the next cluster's pod with the same address is
# unreachable behind them. Remove every veth that routes a pod address.
for dev in $(ip -4 route show 2>/dev/null | awk '$1 ~ /^10\.88\./ && $2 == "dev" && $3 ~ /^veth/ {print $3}'); do
  ip link delete "$dev" 2>/dev/null || true
done
ip route del unreachable 10.88.0.0/16 2>/dev/null || true
if [ -x "$D/bin/kube-proxy" ] && ! pgrep -x kube-proxy >/dev/null; then "$D/bin/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
# kube-router's own --cleanup-config leaves its policy chains (and then panics on IPVS), and
# the kubelet leaves KUBE-FIREWALL and its canaries: they go by name, in every table (the
# kubelet's only when no other kubelet runs here): the jumps into them, then the chains.
parts=()
pgrep -x kube-router >/dev/null || parts+=('ROUTER-' 'POD-FW-' 'NWPLCY-')
pgrep -x kubelet >/dev/null || parts+=('FIREWALL$' 'KUBELET-CANARY$' 'IPTABLES-HINT$')
ours="KUBE-($(IFS='|'; echo "${parts[*]}"))"
[ ${#parts[@]} -gt 0 ] || ours='^$'
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
if command -v ipset >/dev/null && ! pgrep -x kube-router >/dev/null; then
  for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-'); do ipset destroy "$set" 2>/dev/null || true; done
fi
while iptables -S FORWARD 2>/dev/null | grep 'managed-agents-cluster' >/dev/null; do
  rule=$(iptables -S FORWARD | grep -m1 'managed-agents-cluster' | sed 's/^-A /-D /')
  # shellcheck disable=SC2086 # the rule's words are iptables arguments.
  iptables $rule || break
done

# Mounts under the state directory, deepest first.
grep -o " $D/[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done

# Everything but the state that is worth keeping between runs: nothing is. Never across a
# mount that the unmounting above missed.
[ ! -d "$D" ] || rm -rf --one-file-system "$D"
log "stopped and removed $D"
