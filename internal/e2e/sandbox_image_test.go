//go:build integration

package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sandboxImage is the image `make sandbox-image` tags by default (SANDBOX_IMG), the docker
// sandbox's default.
const sandboxImage = "managed-agents-sandbox:dev"

// TestSandboxImage builds the default sandbox image as the README says (`make sandbox-image`,
// a no-op when it is current, as after CI's own build) and checks what the docker sandbox
// relies on: the user, the working directory, the tools the built-ins and a coding agent
// run, and an entrypoint that keeps the container up for exec and ends it on `docker stop`.
func TestSandboxImage(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI on this machine")
	}
	makeImage := func() string {
		t.Helper()
		build := exec.Command("make", "--no-print-directory", "sandbox-image", "SANDBOX_IMG="+sandboxImage)
		build.Dir = "../.."
		out, err := build.CombinedOutput()
		require.NoError(t, err, "make sandbox-image:\n%s", out)
		return string(out)
	}
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		require.NoError(t, err, "docker %s:\n%s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}
	makeImage()
	built := docker("image", "inspect", "--format", "{{.Id}}", sandboxImage)
	// Unchanged inputs: the second make keeps the image it finds.
	require.Contains(t, makeImage(), "nothing to build")
	require.Equal(t, built, docker("image", "inspect", "--format", "{{.Id}}", sandboxImage))
	// The way the docker sandbox runs it: no network, no capabilities, no privilege gain.
	id := docker("run", "-d", "--network", "none", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", sandboxImage)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	sh := func(script string) string {
		t.Helper()
		return docker("exec", id, "sh", "-c", script)
	}

	for _, tc := range []struct{ name, script, want string }{
		{"uid", "id -u", "1000"},
		{"gid", "id -g", "1000"},
		{"user name", "id -un", "agent"},
		{"working directory", "pwd", "/workspace"},
		{"workspace writable", "echo hello > f && cat f && rm f", "hello"},
		{"GNU find -printf", "mkdir -p d && printf abc > d/f && find d -type f -printf '%s %P\\n' && rm -r d", "3 f"},
		{"stdbuf preloads its library", "stdbuf -oL echo line-buffered", "line-buffered"},
		{"sh is dash", "readlink -f /bin/sh", "/usr/bin/dash"},
		{"python3 runs", "python3 -c 'print(6*7)'", "42"},
		{"CA bundle", "test -s /etc/ssl/certs/ca-certificates.crt && echo present", "present"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sh(tc.script))
		})
	}

	tools := []string{
		"bash", "stdbuf", "timeout", "head", "wc", "setsid", "find", "grep", "sed", "awk",
		"diff", "patch", "tar", "gzip", "xz", "ps", "kill", "curl", "git", "python3", "sleep", "sh",
	}
	for _, tool := range tools {
		t.Run("tool "+tool, func(t *testing.T) {
			// type -P finds only files on PATH: kill and the like are also shell builtins.
			require.NotEmpty(t, docker("exec", id, "bash", "-c", "type -P "+tool))
		})
	}

	t.Run("workspace volume on a read-only root", func(t *testing.T) {
		// A fresh named volume takes /workspace's owner from the image, so the agent can
		// write it while the rest of the filesystem stays read-only.
		vol := docker("volume", "create")
		t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", vol).Run() })
		out := docker("run", "--rm", "--network", "none", "--read-only", "-v", vol+":/workspace",
			"--entrypoint", "/bin/sh", sandboxImage, "-c",
			"echo kept > /workspace/f && cat /workspace/f && if touch /etc/f 2>/dev/null; then echo root-writable; fi")
		require.Equal(t, "kept", out)
	})

	// The execs above ran in the container, so the entrypoint kept it up; it still is.
	require.Equal(t, "true", docker("inspect", "--format", "{{.State.Running}}", id))
	// docker stop sends SIGTERM and SIGKILLs only after the grace time: exit status 0 says the
	// entrypoint ended on the TERM itself, a 137 that the grace time ran out.
	docker("stop", "--time", "30", id)
	require.Equal(t, "0", docker("inspect", "--format", "{{.State.ExitCode}}", id))
}
