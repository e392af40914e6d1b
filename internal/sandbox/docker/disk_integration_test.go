//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// freeBytes is what the host's filesystem holding dir has free.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	return int64(st.Bavail) * st.Bsize
}

// A sandbox fills its workspace: the write fails inside the sandbox at the deployment's
// limit, the host loses no more than the limit, and another session's sandbox still writes.
func TestWorkspaceDiskIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const limit = 64 << 20
	p := newProvider(t, docker.Config{DiskBytes: limit, DiskDir: dir})
	_, sb := newSandbox(t, p)
	_, other := newSandbox(t, p)

	before := freeBytes(t, dir)
	out, code := sh(t, sb, `fallocate -l 200M /workspace/big.bin; echo "fallocate=$?"; dd if=/dev/zero of=/workspace/dd.bin bs=1M count=200 2>&1 | tail -n1; echo "dd=${PIPESTATUS[0]}"; df -B1 --output=size /workspace | tail -n1`)
	require.Zero(t, code, out)
	require.Contains(t, out, "fallocate=1", "fallocate past the limit fails: %s", out)
	require.Contains(t, out, "No space left on device", out)
	require.Contains(t, out, "dd=1", "a write past the limit fails: %s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var size int64
	_, err := fmt.Sscan(lines[len(lines)-1], &size)
	require.NoError(t, err, out)
	require.LessOrEqual(t, size, int64(limit), "the workspace is the limit's size")
	// The host lost at most the limit (and other processes' writes meanwhile, well under it).
	require.Less(t, before-freeBytes(t, dir), int64(limit)+16<<20)

	out, code = sh(t, other, "head -c 8388608 /dev/zero > /workspace/mine && wc -c < /workspace/mine")
	require.Zero(t, code, out)
	require.Equal(t, "8388608\n", out, "another session is untouched")
	out, code = sh(t, sb, "rm /workspace/dd.bin /workspace/big.bin; echo ok > /workspace/after && cat /workspace/after")
	require.Zero(t, code, out)
	require.Equal(t, "ok\n", out, "deleting frees the space again")
}

// The environment's size wins over the deployment's; a stopped sandbox comes back with its
// files on its bounded disk; Destroy removes the disk.
func TestWorkspaceDiskOfTheSpecSurvivesAStopAndGoesWithDestroy(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	dir := t.TempDir()
	p := newProvider(t, docker.Config{DiskBytes: 256 << 20, DiskDir: dir})
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_disk_%d_%d", os.Getpid(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
	spec.Resources.DiskBytes = 32 << 20
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = p.Destroy(context.Background(), ref)
		}
	})
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	out, code := sh(t, sb, "df -B1 --output=size /workspace | tail -n1; stat -c %u /workspace; ls -A /workspace | wc -l")
	require.Zero(t, code, out)
	f := strings.Fields(out)
	require.Len(t, f, 3, out)
	var size int64
	_, err = fmt.Sscan(f[0], &size)
	require.NoError(t, err)
	require.LessOrEqual(t, size, int64(32<<20), "the spec's size")
	require.Equal(t, "1000", f[1], "the sandbox's user owns its workspace")
	require.Equal(t, "0", f[2], "a new workspace is empty")
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))

	require.NoError(t, p.Stop(t.Context(), ref))
	again, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))

	images, err := filepath.Glob(filepath.Join(dir, "*.img"))
	require.NoError(t, err)
	require.Len(t, images, 1)
	require.NoError(t, p.Destroy(t.Context(), ref))
	destroyed = true
	images, err = filepath.Glob(filepath.Join(dir, "*.img"))
	require.NoError(t, err)
	require.Empty(t, images, "Destroy removes the disk")
	_, err = cli.VolumeInspect(t.Context(), ref.ExternalID+"-workspace", client.VolumeInspectOptions{})
	require.Error(t, err)
}

// A disk whose volume is gone (a worker died between them) is removed by the sweep's listing
// once it is old enough; a workspace volume whose container never came is listed with its
// session, so the sweep destroys it and its disk.
func TestOrphanedWorkspaceDisksAreCleanedUp(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	dir := t.TempDir()
	p := newProvider(t, docker.Config{DiskBytes: 32 << 20, DiskDir: dir})

	lone := sandbox.NameFor(fmt.Sprintf("sesn_diskorphan_%d_%d", os.Getpid(), sessions.Add(1))) + "-workspace"
	require.NoError(t, os.MkdirAll(filepath.Join(dir, lone), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, lone+".img"), nil, 0o600))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, lone), old, old))

	// A Create that failed after the volume: disk and volume, no container.
	spec := sandbox.SpecFor(fmt.Sprintf("sesn_diskvol_%d_%d", os.Getpid(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
	name := docker.ContainerName(spec.Name)
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	_, err = cli.ContainerRemove(t.Context(), ref.ExternalID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)

	listed, err := p.List(t.Context())
	require.NoError(t, err)
	var found *sandbox.Resource
	for i, r := range listed {
		if r.Ref.ExternalID == name {
			found = &listed[i]
		}
	}
	require.NotNil(t, found, "the sandbox of a volume without a container is listed")
	require.Equal(t, spec.SessionID, found.SessionID, "with its session, so the sweep can judge it")
	_, err = os.Stat(filepath.Join(dir, lone+".img"))
	require.ErrorIs(t, err, os.ErrNotExist, "a disk without a volume is removed")

	require.NoError(t, p.Destroy(t.Context(), ref))
	images, err := filepath.Glob(filepath.Join(dir, "*.img"))
	require.NoError(t, err)
	require.Empty(t, images, "Destroy removes the disk")
}

// A stopped sandbox whose disk was unmounted behind the provider's back (a reboot) starts with
// its disk mounted again and its files; a worker whose settings no longer manage that disk
// refuses to start it rather than bind the bare mount point.
func TestAStoppedSandboxStartsOnlyWithItsDisk(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	dir := t.TempDir()
	p := newProvider(t, docker.Config{DiskBytes: 32 << 20, DiskDir: dir})
	ref, sb := newSandbox(t, p)
	require.NoError(t, sb.WriteFile(t.Context(), "kept.txt", []byte("kept")))
	require.NoError(t, p.Stop(t.Context(), ref))
	mnt := filepath.Join(dir, ref.ExternalID+"-workspace")
	require.NoError(t, unix.Unmount(mnt, 0))

	_, err := newProvider(t, docker.Config{DiskBytes: docker.DiskUnbounded}).Attach(t.Context(), ref)
	require.ErrorContains(t, err, "which this worker does not manage")
	info, err := cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.False(t, info.Container.State.Running, "never started on the bare mount point")

	again, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	data, err := again.ReadFile(t.Context(), "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(data))
}
