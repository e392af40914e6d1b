// Command pause is the test cluster's pod sandbox process (containerd's sandbox_image): it
// holds a pod's namespaces open and does nothing else. hack/cluster/images.sh builds it into
// an image FROM scratch, because this machine has no registry to pull registry.k8s.io/pause
// from.
//
// As PID 1 of the sandbox it must end on SIGTERM or SIGINT (the kubelet stops pods so) and
// must reap orphans that share its PID namespace (pods with shareProcessNamespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; several SIGCHLDs may have merged into one.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
