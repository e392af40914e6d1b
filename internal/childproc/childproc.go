// Package childproc starts the long-lived helper processes of `dev` (PostgreSQL, the Temporal
// dev server) so that they die with us: it owns the one subtle rule that makes a parent-death
// signal work in Go. It imports only the standard library.
package childproc

import (
	"os/exec"
	"runtime"
)

// Start starts cmd and returns a channel that receives cmd.Wait's result when the child exits.
//
// A parent-death signal (cmd.SysProcAttr.Pdeathsig) fires when the thread that forked the
// child exits, not when the process does, and Go may retire an idle thread at any time; so
// the child is forked on a thread locked to a goroutine that stays until the child has exited.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
