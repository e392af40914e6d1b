#!/usr/bin/env bash
# Brings up a real single-node Kubernetes cluster on this machine, from host processes, the
# way upstream's hack/local-up-cluster.sh does: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, a kubelet on a containerd of its own, kube-proxy, kube-router's network
# policy controller (the NetworkPolicy engine) and kubernetes-sigs/agent-sandbox's controller
# with its CRDs (Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool: what the
# SandboxBinding controller provisions sandboxes through), plus CoreDNS as a pod. No registry
# is needed: every image the cluster runs is loaded into its containerd from the local Docker
# engine (`docker save`).
#
# Prints `export KUBECONFIG=...` as its last line. hack/cluster/down.sh stops it and removes
# everything it made (processes, mounts, network namespaces, iptables and nftables rules).
#
# Needs root, cgroups (v1 or v2), Debian's containerd, runc, containernetworking-plugins,
# iptables, ipset, conntrack and openssl (.ci/run installs them), and the binaries of
# hack/cluster/assets.sh and hack/envtest-assets.sh.
#
# Usage: hack/cluster/up.sh [IMAGE...]   (images of the local Docker engine to load; the
#        cluster's own images are always loaded)
# Environment: CLUSTER_DIR (default /var/lib/managed-agents-cluster) holds all of its state.
# CLUSTER_GVISOR=0 leaves out gVisor (the RuntimeClass gvisor).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=${CLUSTER_DIR:-/var/lib/managed-agents-cluster}
NODE=ma-node
POD_CIDR=10.88.0.0/16
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
# How many local PersistentVolumes the node offers (the `standard` StorageClass, static).
LOCAL_PVS=${CLUSTER_LOCAL_PVS:-40}

log() { printf 'cluster-up: %s\n' "$*" >&2; }
die() { log "$*"; log "logs: $D/logs"; exit 1; }

[ "$(id -u)" = 0 ] || die "the cluster needs root (containerd, the kubelet and kube-proxy)"
[[ $D == /?* ]] || die "CLUSTER_DIR=$D: want an absolute path"
for tool in containerd runc ctr iptables ipset conntrack openssl docker ip pgrep sysctl flock; do
  command -v "$tool" >/dev/null || die "$tool is missing (apt-get install containerd runc iptables ipset conntrack openssl)"
done
[ -x /usr/lib/cni/ptp ] || die "/usr/lib/cni/ptp is missing (apt-get install containernetworking-plugins)"

# Whatever an earlier run left (a killed test, a session that ended) goes first.
"$repo/hack/cluster/down.sh" >&2
for other in kubelet kube-proxy k3s kube-router; do
  ! pgrep -x "$other" >/dev/null || die "a $other already runs on this machine: the test cluster would fight it over iptables and pods"
done

envtest=$(cd "$repo" && make --no-print-directory envtest-assets | tail -n1)
assets=$("$repo/hack/cluster/assets.sh" | tail -n1)
bin=$D/bin
mkdir -p "$D"/{bin,pki,logs,run,etcd,kubelet,containerd,cni/net.d,cni/ipam,pv}
# down.sh removes CLUSTER_DIR only when this marker says up.sh made it.
touch "$D/.managed-agents-cluster"
for b in kube-apiserver etcd kubectl; do ln -sf "$envtest/$b" "$bin/$b"; done
for b in kubelet kube-controller-manager kube-scheduler kube-proxy kube-router agent-sandbox-controller; do ln -sf "$assets/$b" "$bin/$b"; done
export PATH=$bin:$PATH

# --- gVisor: RuntimeClass gvisor (handler runsc), when runsc builds and runs here ------------------
# runsc and its containerd shim from hack/cluster/gvisor-assets.sh (the shim patched for
# containerd 1.6). The cluster works without them: a failure only leaves the RuntimeClass out,
# and so does CLUSTER_GVISOR=0.
gvisor=
if [ "${CLUSTER_GVISOR:-1}" != 0 ]; then
  if ! gvisor_assets=$("$repo/hack/cluster/gvisor-assets.sh" | tail -n1); then
    log "gVisor did not build (see above): no RuntimeClass gvisor"
  elif ! gvisor_check=$(timeout 60 "$gvisor_assets/runsc" --root "$D/run/runsc-check" --platform systrap \
    --network none do /bin/true 2>&1); then
    log "runsc does not run here, no RuntimeClass gvisor: $gvisor_check"
  else
    gvisor=$gvisor_assets
    for b in runsc containerd-shim-runsc-v1; do ln -sf "$gvisor/$b" "$bin/$b"; done
  fi
fi

# The node's address: the source address of its default route (pods reach the API server
# there through the kubernetes Service).
NODE_IP=${CLUSTER_NODE_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' || true)}
[ -n "$NODE_IP" ] || NODE_IP=$(hostname -I | awk '{print $1}')
[ -n "$NODE_IP" ] || die "cannot tell the node's IP address; set CLUSTER_NODE_IP"
log "node $NODE at $NODE_IP, state in $D"

# --- PKI: a CA, the API server's serving certificate, a client certificate per component ---------
pki=$D/pki
cert() { # name CN O [subjectAltNames]
  local name=$1 cn=$2 o=$3 san=${4:-}
  openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
  local subj="/CN=$cn"
  [ -z "$o" ] || subj="/O=$o$subj"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 30 \
  -subj "/CN=managed-agents-test-cluster-ca" 2>/dev/null
cert apiserver kube-apiserver "" \
  "IP:$API_SERVICE_IP,IP:$NODE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin kubernetes-admin system:masters
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert kubelet "system:node:$NODE" system:nodes
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert proxy system:kube-proxy ""
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null

kubeconfig() { # name → $D/name.kubeconfig with that client certificate
  local f=$D/$1.kubeconfig
  kubectl config --kubeconfig "$f" set-cluster local --server "https://$NODE_IP:6443" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-credentials "$1" --client-certificate "$pki/$1.crt" \
    --client-key "$pki/$1.key" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-context local --cluster local --user "$1" >/dev/null
  kubectl config --kubeconfig "$f" use-context local >/dev/null
}
for c in admin kubelet controller-manager scheduler proxy; do kubeconfig "$c"; done
export KUBECONFIG=$D/admin.kubeconfig

start() { # name command...: runs it in the background, its output in logs/name.log
  local name=$1; shift
  "$@" >"$D/logs/$name.log" 2>&1 &
  echo $! >"$D/run/$name.pid"
}
wait_for() { # what seconds command...
  local what=$1 limit=$2 i; shift 2
  for ((i = 0; i < limit; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  die "$what was not ready after ${limit}s"
}

# --- etcd and the control plane -------------------------------------------------------------------
# No fsync: the cluster lives for one test run.
start etcd etcd --name node --data-dir "$D/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster node=http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810
start kube-apiserver kube-apiserver --etcd-servers http://127.0.0.1:23790 \
  --secure-port 6443 --bind-address 0.0.0.0 --advertise-address "$NODE_IP" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
  --allow-privileged=true --enable-admission-plugins NodeRestriction \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --profiling=false
wait_for "kube-apiserver" 90 kubectl get --raw /readyz
start kube-controller-manager kube-controller-manager --kubeconfig "$D/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$D/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$D/controller-manager.kubeconfig" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 10257 --profiling=false
start kube-scheduler kube-scheduler --kubeconfig "$D/scheduler.kubeconfig" \
  --authentication-kubeconfig "$D/scheduler.kubeconfig" \
  --authorization-kubeconfig "$D/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --profiling=false

# --- containerd: an instance of its own, beside Docker's -------------------------------------------
# restrict_oom_score_adj: no process here may lower its oom_score_adj, which runc would
# otherwise try for every pod ("can't get final child's PID from pipe").
cat >"$D/containerd/config.toml" <<TOML
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
[grpc]
  address = "$D/containerd/containerd.sock"
[ttrpc]
  address = "$D/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/managed-agents-pause:dev"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$D/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
TOML
# gVisor: a runtime runsc beside runc (containerd finds containerd-shim-runsc-v1 on its PATH,
# $bin), and the RuntimeClass that selects it. The shim reads runsc.toml: which runsc, its state
# directory, and runsc's own flags: systrap (runsc's default platform) needs no KVM; oci-seccomp
# applies a pod's seccomp profile (RuntimeDefault) inside the sandbox too, which runsc otherwise
# ignores (its own filter guards the host either way).
if [ -n "$gvisor" ]; then
  cat >>"$D/containerd/config.toml" <<TOML
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
    runtime_type = "io.containerd.runsc.v1"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
      TypeUrl = "io.containerd.runsc.v1.options"
      ConfigPath = "$D/containerd/runsc.toml"
TOML
  cat >"$D/containerd/runsc.toml" <<TOML
binary_name = "$bin/runsc"
root = "$D/containerd/runsc"
[runsc_config]
  platform = "systrap"
  oci-seccomp = "true"
TOML
  printf 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n' |
    kubectl apply -f - >/dev/null
  log "RuntimeClass gvisor: runsc $("$bin/runsc" --version | head -n1 | cut -d' ' -f3)"
fi
# ptp, not bridge: every pod's traffic is routed through the host, so the NetworkPolicy
# engine's iptables rules see pod-to-pod packets too (on a bridge they would be switched past
# netfilter unless br_netfilter is on, which would also put Docker's FORWARD DROP in their way).
cat >"$D/cni/net.d/10-managed-agents.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "managed-agents-cluster",
  "plugins": [
    {
      "type": "ptp",
      "mtu": 1400,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$D/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
start containerd containerd --config "$D/containerd/config.toml"
CTR=(ctr --address "$D/containerd/containerd.sock" --namespace k8s.io)
wait_for containerd 30 "${CTR[@]}" version

# Pod traffic is forwarded by the host; Docker's FORWARD policy is DROP. The NetworkPolicy
# engine inserts its chain at the top of FORWARD (and INPUT, OUTPUT), before these rules, and
# drops there what a policy forbids.
# Only pod to pod: a pod's packets to anywhere else are refused rather than forwarded off the
# machine with a pod address (the pods have no masquerade and nothing else to reach).
iptables -I FORWARD 1 -s "$POD_CIDR" -m comment --comment managed-agents-cluster -j REJECT
iptables -I FORWARD 1 -s "$POD_CIDR" -d "$POD_CIDR" -m comment --comment managed-agents-cluster -j ACCEPT
sysctl -qw net.ipv4.ip_forward=1
# ptp gives each pod a host route of its own. An address of a pod that is gone would
# otherwise follow the default route out of this machine, and a client still holding a
# connection to it (the Service's conntrack entry) would wait for minutes instead of being
# told at once that nobody is there.
ip route replace unreachable "$POD_CIDR"

# --- images ---------------------------------------------------------------------------------------
# The cluster's own (pause, CoreDNS) are single binaries FROM scratch.
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
for b in pause coredns; do
  mkdir -p "$ctx/$b"
  cp "$assets/$b" "$ctx/$b/$b"
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$b" "$b" "$b" >"$ctx/$b/Dockerfile"
  docker build -q -t "managed-agents-$b:dev" "$ctx/$b" >/dev/null
done
load() {
  local img
  for img in "$@"; do
    docker image inspect "$img" >/dev/null 2>&1 || die "image $img is not in the local Docker engine"
    log "loading $img"
    docker save "$img" | "${CTR[@]}" images import - >/dev/null
  done
}
load managed-agents-pause:dev managed-agents-coredns:dev "$@"

# --- kubelet and kube-proxy -------------------------------------------------------------------------
cat >"$D/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: "unix://$D/containerd/containerd.sock"
cgroupDriver: cgroupfs
# The host may still be on cgroup v1, which the kubelet otherwise refuses since 1.35.
failCgroupV1: false
failSwapOn: false
clusterDNS: ["$DNS_IP"]
clusterDomain: cluster.local
serializeImagePulls: false
# The images are loaded, not pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The pods' logs with the rest of the cluster's state, not in the host's /var/log/pods.
podLogsDir: "$D/logs/pods"
YAML
start kubelet kubelet --config "$D/kubelet/config.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
  --hostname-override "$NODE" --node-ip "$NODE_IP" --root-dir "$D/kubelet/root" \
  --cert-dir "$D/kubelet/pki"
cat >"$D/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: "$POD_CIDR"
hostnameOverride: "$NODE"
clientConnection: {kubeconfig: "$D/proxy.kubeconfig"}
# Leave the host's conntrack settings and route_localnet alone.
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
YAML
start kube-proxy kube-proxy --config "$D/kube-proxy.yaml"
wait_for "node $NODE" 90 kubectl get node "$NODE"
kubectl label node "$NODE" node-role.kubernetes.io/control-plane= --overwrite >/dev/null

# --- storage: local PersistentVolumes on this node (static, WaitForFirstConsumer) ------------------
# Local volumes get fsGroup ownership like emptyDirs do, so a non-root PostgreSQL can write its
# data directory; hostPath volumes would not.
{
  cat <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML
  for ((i = 0; i < LOCAL_PVS; i++)); do
    mkdir -p "$D/pv/pv$i"
    cat <<YAML
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-pv$i}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: standard
  local: {path: "$D/pv/pv$i"}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: ["$NODE"]}]
YAML
  done
} | kubectl apply -f - >/dev/null

# --- agent-sandbox: its CRDs and controller ----------------------------------------------------------
# kubernetes-sigs/agent-sandbox's controller with its extensions (SandboxClaim, SandboxTemplate,
# SandboxWarmPool besides Sandbox), a host process with the admin credentials like kube-router.
# One replica: no leader election; no metrics or health endpoints (0 disables them), so no ports.
# Server-side apply: the CRDs are too large for kubectl's last-applied annotation.
as_crds=$assets/agent-sandbox-crds
kubectl apply --server-side -f "$as_crds" >/dev/null
wait_for "agent-sandbox's CRDs" 60 kubectl wait --for condition=established -f "$as_crds" --timeout=1s
start agent-sandbox-controller agent-sandbox-controller --kubeconfig "$D/admin.kubeconfig" --extensions \
  --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address=0

# --- the NetworkPolicy engine and cluster DNS --------------------------------------------------------
# kube-router's network policy controller alone (no routing, no service proxy, no CNI): it
# keeps iptables chains and ipsets per pod that a policy selects, for ingress and egress,
# pod to pod and pod to node. A host process with the admin credentials, like the rest of the
# control plane here.
start kube-router kube-router --kubeconfig "$D/admin.kubeconfig" --hostname-override "$NODE" \
  --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
  --service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0
sed "s/@DNS_IP@/$DNS_IP/" "$repo/hack/cluster/addons.yaml" | kubectl apply -f - >/dev/null
wait_for "node $NODE Ready" 120 kubectl wait --for=condition=Ready "node/$NODE" --timeout=1s
wait_for "kube-router's policy chains" 60 iptables -S KUBE-ROUTER-FORWARD
if ! kubectl -n kube-system rollout status deploy/coredns --timeout=120s >&2; then
  kubectl -n kube-system get pods -o wide >&2 || true
  die "the cluster's add-ons did not start"
fi
# Each of agent-sandbox's controllers (one per CRD) logs "Starting workers" once it watches.
as_want=$(find "$as_crds" -name '*.yaml' | wc -l)
for ((i = 0; ; i++)); do
  kill -0 "$(cat "$D/run/agent-sandbox-controller.pid")" 2>/dev/null || die "agent-sandbox-controller exited"
  [ "$(grep -c '"msg":"Starting workers"' "$D/logs/agent-sandbox-controller.log")" -lt "$as_want" ] || break
  [ "$i" -lt 60 ] || die "agent-sandbox's $as_want controllers had not started after 60s"
  sleep 1
done
log "cluster ready"
echo "export KUBECONFIG=$D/admin.kubeconfig"
