// Package charttest tests the Helm chart (charts/managed-agents) as its users run it: the
// pinned helm binary renders and installs it, kubectl applies it, and a real kube-apiserver
// with etcd (envtest) accepts or refuses the objects. It has no code of its own.
package charttest
