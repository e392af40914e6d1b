// Package workspace runs commands and file operations confined to one directory on the
// machine it runs on: the sandbox.Sandbox (and sandbox.FileSearcher) of a host directory.
// The local provider serves a session's work directory with it, and sandboxd serves the
// workspace of a sandbox pod with it, so both behave exactly alike.
//
// File operations go through os.Root (`..`, absolute paths elsewhere and symlinks that leave
// the workspace are refused). Commands run as `bash -c` with the given environment only, in
// their own process group, killed whole on timeout or cancellation, their output capped. The
// confinement of commands is whatever the machine gives: on the host none (local), in a pod
// the pod's.
//
// It imports only the sandbox interfaces.
package workspace
