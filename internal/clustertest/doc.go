// Package clustertest holds the tests that run on a real single-node Kubernetes cluster
// (hack/cluster/up.sh): the Helm chart installed as docs/kubernetes.md says, sandbox pods on a
// real kubelet and containerd, NetworkPolicies enforced by a real engine, and pod kills during
// running turns. They carry the build tag `cluster` and run under `make test-cluster`, which
// brings the cluster up, sets KUBECONFIG, KUBECTL and HELM, and tears the cluster down after.
package clustertest
