package disks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func newDisks(t *testing.T) *Disks {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop mounts need root")
	}
	d, err := New(t.TempDir())
	require.NoError(t, err)
	return d
}

// fill writes zeros to path until the write fails or n bytes are written, and returns what
// was written and the error that stopped it.
func fill(path string, n int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var done int64
	for done < n {
		w, err := f.Write(buf)
		done += int64(w)
		if err != nil {
			return done, err
		}
	}
	return done, f.Sync()
}

func TestEnsureBoundsWritesAndKeepsData(t *testing.T) {
	d := newDisks(t)
	ctx := context.Background()
	const size = 32 << 20
	mnt, err := d.Ensure(ctx, "ws-a", size, 1000, 1000)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Remove(context.Background(), "ws-a") })

	var st unix.Stat_t
	require.NoError(t, unix.Stat(mnt, &st))
	require.Equal(t, uint32(1000), st.Uid, "the sandbox's user owns the workspace")
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	require.Empty(t, entries, "a new workspace is empty (no lost+found)")

	// Writing past the size fails with ENOSPC, after at most the size.
	written, err := fill(filepath.Join(mnt, "big"), 64<<20)
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ENOSPC), "got %v", err)
	require.LessOrEqual(t, written, int64(size))
	// fallocate is refused the same way.
	f, err := os.Create(filepath.Join(mnt, "alloc"))
	require.NoError(t, err)
	require.ErrorIs(t, unix.Fallocate(int(f.Fd()), 0, 0, 64<<20), syscall.ENOSPC)
	require.NoError(t, f.Close())

	// The image on the host holds no more than the size.
	var img unix.Stat_t
	require.NoError(t, unix.Stat(d.image("ws-a"), &img))
	require.LessOrEqual(t, img.Blocks*512, int64(size))

	// A second disk is untouched by the first being full.
	mntB, err := d.Ensure(ctx, "ws-b", size, 1000, 1000)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Remove(context.Background(), "ws-b") })
	_, err = fill(filepath.Join(mntB, "small"), 4<<20)
	require.NoError(t, err)

	// Space comes back when the sandbox deletes what it wrote.
	require.NoError(t, os.Remove(filepath.Join(mnt, "big")))
	require.NoError(t, os.Remove(filepath.Join(mnt, "alloc")))
	// Ensure again is a no-op; after an unmount (a reboot) it mounts the same data back.
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "keep"), []byte("kept"), 0o644))
	again, err := d.Ensure(ctx, "ws-a", size, 1000, 1000)
	require.NoError(t, err)
	require.Equal(t, mnt, again)
	require.NoError(t, unix.Unmount(mnt, 0))
	_, err = d.Ensure(ctx, "ws-a", size, 1000, 1000)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(mnt, "keep"))
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))

	names, err := d.Names()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"ws-a", "ws-b"}, names)

	// Remove unmounts and deletes; removing again is not an error.
	require.NoError(t, d.Remove(ctx, "ws-a"))
	require.NoError(t, d.Remove(ctx, "ws-a"))
	_, err = os.Stat(d.image("ws-a"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(mnt)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestRemoveOfADiskInUseKeepsIt(t *testing.T) {
	d := newDisks(t)
	ctx := context.Background()
	mnt, err := d.Ensure(ctx, "busy", MinSize, 0, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Remove(context.Background(), "busy") })
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "data"), []byte("live"), 0o644))
	// Another mount of the filesystem holds it, as the engine's bind of the volume does
	// while a container runs: the unmount here succeeds, the image must stay.
	other := t.TempDir()
	require.NoError(t, unix.Mount(mnt, other, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(other, unix.MNT_DETACH) })
	require.ErrorContains(t, d.Remove(ctx, "busy"), "still in use")
	_, err = os.Stat(d.image("busy"))
	require.NoError(t, err, "the image of a disk in use stays")
	got, err := os.ReadFile(filepath.Join(other, "data"))
	require.NoError(t, err)
	require.Equal(t, "live", string(got))

	// Once the other mount goes, Ensure mounts it again with its data, and Remove deletes it.
	require.NoError(t, unix.Unmount(other, 0))
	mnt, err = d.Ensure(ctx, "busy", MinSize, 0, 0)
	require.NoError(t, err)
	got, err = os.ReadFile(filepath.Join(mnt, "data"))
	require.NoError(t, err)
	require.Equal(t, "live", string(got))
	require.NoError(t, d.Remove(ctx, "busy"))
	_, err = os.Stat(d.image("busy"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// An unmounted disk's mount point is not an empty directory: whatever binds it by mistake
// (a mount made in another namespace, a reboot) finds a root-owned marker, not an empty,
// writable, unbounded directory.
func TestAnUnmountedMountPointIsNotEmpty(t *testing.T) {
	d := newDisks(t)
	ctx := context.Background()
	mnt, err := d.Ensure(ctx, "marked", MinSize, 1000, 1000)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Remove(context.Background(), "marked") })
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	require.Empty(t, entries, "mounted: the marker is hidden")
	require.NoError(t, unix.Unmount(mnt, 0))
	entries, err = os.ReadDir(mnt)
	require.NoError(t, err)
	require.Len(t, entries, 1, "unmounted: the marker shows")
	var st unix.Stat_t
	require.NoError(t, unix.Stat(mnt, &st))
	require.Equal(t, uint32(0), st.Uid)
	require.Equal(t, uint32(0o700), st.Mode&0o777)
}

// Concurrent Ensure and Remove calls of one name never interleave.
func TestConcurrentCallsOfOneName(t *testing.T) {
	d := newDisks(t)
	ctx := context.Background()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			if i%2 == 0 {
				_, err := d.Ensure(ctx, "shared", MinSize, 1000, 1000)
				errs <- err
				return
			}
			errs <- d.Remove(ctx, "shared")
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
	require.NoError(t, d.Remove(ctx, "shared"))
	_, err := os.Stat(d.image("shared"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestNamesAndSizesAreChecked(t *testing.T) {
	d := newDisks(t)
	ctx := context.Background()
	for _, name := range []string{"", "../x", "a/b", ".hidden", "x.img", "x.lock", "x.tmp"} {
		_, err := d.Ensure(ctx, name, MinSize, 0, 0)
		require.Error(t, err, "%q", name)
		require.Error(t, d.Remove(ctx, name), "%q", name)
	}
	_, err := d.Ensure(ctx, "tiny", MinSize-1, 0, 0)
	require.ErrorContains(t, err, "too small")
	_, err = New("relative/dir")
	require.Error(t, err)
}

// BenchmarkEnsureAndRemove is what a bounded workspace adds to a docker sandbox's create and
// destroy: format a 10 GiB sparse image, mount it, unmount it, delete it.
func BenchmarkEnsureAndRemove(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loop mounts need root")
	}
	d, err := New(b.TempDir())
	require.NoError(b, err)
	ctx := context.Background()
	var hostBytes int64
	for i := 0; b.Loop(); i++ {
		name := "bench-" + string(rune('a'+i%26))
		_, err := d.Ensure(ctx, name, 10<<30, 1000, 1000)
		require.NoError(b, err)
		var st unix.Stat_t
		require.NoError(b, unix.Stat(d.image(name), &st))
		hostBytes = st.Blocks * 512
		require.NoError(b, d.Remove(ctx, name))
	}
	b.ReportMetric(float64(hostBytes)/(1<<20), "host-MiB/disk")
}
