// Package disks gives a sandbox's workspace a filesystem of its own with a fixed size: an
// ext4 filesystem in a sparse image file, mounted through a loop device on the host that
// runs the sandboxes. A write past the size fails inside the sandbox with ENOSPC; the host's
// disk loses at most the size, whatever the sandbox does, and other sandboxes lose nothing.
//
// Why a loop device: the Docker Engine bounds neither a named volume nor a bind mount (its
// local volume driver takes a size only on XFS with project quotas, and a container's
// writable layer only on some storage drivers), so a bound the deployment sets must come
// from a filesystem of the bound's size. A sparse image costs the host only the blocks the
// sandbox writes (plus a few MiB of metadata).
//
// The mounts are made by the process that calls Ensure, in its mount namespace, so it must
// run as root (CAP_SYS_ADMIN) on the engine's host and share the engine's mount namespace
// (New checks root; a namespace of its own is caught by the marker below). Everything is
// keyed by a name the caller chooses; every operation is idempotent and safe to retry after a
// crash at any point (an image is formatted and synced under a temporary name and renamed, a
// mount is checked before it is made), and concurrent calls for one name, from one process
// or several, are serialised by a lock file.
//
// A mount point holds a root-owned marker file under the mount. Should anything bind the
// directory while the disk is not mounted there (a mount made in another namespace, a
// reboot nobody remounted after), the sandbox finds a non-empty, root-owned 0700 directory
// it cannot write to, a loud failure, instead of an empty, unbounded one on the host's disk.
package disks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
)

// MinSize is the smallest filesystem: ext4's metadata and journal need a few MiB.
const MinSize = 16 << 20

// Disks are the workspace filesystems under one directory.
type Disks struct {
	dir     string
	mounter mountutils.Interface
}

// marker is the file under every mount point (see the package comment).
const marker = ".not-mounted"

// New returns the disks under dir (created if missing), after checking that this process
// can make them: root, mkfs.ext4 and mount on PATH, and a loop device.
func New(dir string) (*Disks, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("workspace disks: the directory %q must be an absolute path", dir)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("workspace disks: loop-mounting a filesystem needs root (CAP_SYS_ADMIN) on the host that runs the sandboxes")
	}
	for _, tool := range []string{"mkfs.ext4", "fsck.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("workspace disks: %s not found (Debian: e2fsprogs, util-linux, mount): %w", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return nil, fmt.Errorf("workspace disks: no loop devices on this host (modprobe loop): %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace disks: create %s: %w", dir, err)
	}
	// Without systemd: an ext4 loop mount needs no scope of its own to outlive this process.
	return &Disks{dir: dir, mounter: mountutils.NewWithoutSystemd("")}, nil
}

// Dir is the directory the disks live in.
func (d *Disks) Dir() string { return d.dir }

func (d *Disks) image(name string) string { return filepath.Join(d.dir, name+".img") }

// Path is where the disk of name is mounted.
func (d *Disks) Path(name string) string { return filepath.Join(d.dir, name) }

func checkName(name string) error {
	if name == "" || len(name) > 200 || strings.ContainsAny(name, "/\x00") || name[0] == '.' || strings.HasSuffix(name, ".img") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".tmp") {
		return fmt.Errorf("workspace disks: %q is not a disk name", name)
	}
	return nil
}

// lock takes the lock of name, which excludes other processes and, since every call opens
// the file anew, other goroutines of this one; the returned function releases it. Remove
// unlinks a lock file while holding it, so a lock taken on a file no longer at its path is
// retried on the new one.
func (d *Disks) lock(name string) (func(), error) {
	path := filepath.Join(d.dir, name+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("workspace disk %s: lock: %w", name, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("workspace disk %s: lock: %w", name, err)
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			return func() { _ = f.Close() }, nil // closing releases the flock
		}
		_ = f.Close()
	}
}

// Ensure makes the disk of name with size bytes if it does not exist (an existing one keeps
// its size), mounts it if it is not mounted (after a reboot, say), and returns its mount
// point, whose root belongs to uid:gid.
func (d *Disks) Ensure(ctx context.Context, name string, size int64, uid, gid int) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if size < MinSize {
		return "", fmt.Errorf("workspace disk %s: %d bytes is too small (at least %d)", name, size, MinSize)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	unlock, err := d.lock(name)
	if err != nil {
		return "", err
	}
	defer unlock()
	target := d.Path(name)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return "", fmt.Errorf("workspace disk %s: %w", name, err)
	}
	if mounted, err := d.mounted(target); err != nil || mounted {
		return target, err
	}
	if err := os.WriteFile(filepath.Join(target, marker), []byte("this workspace's disk is not mounted here\n"), 0o600); err != nil {
		return "", fmt.Errorf("workspace disk %s: %w", name, err)
	}
	img := d.image(name)
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		if err := d.format(ctx, img, size, uid, gid); err != nil {
			return "", fmt.Errorf("workspace disk %s: %w", name, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("workspace disk %s: %w", name, err)
	}
	// A crash may have left the filesystem unclean: fsck -p repairs what is safe to repair
	// and fails on the rest. (Never "format if unformatted": an image whose superblock is
	// damaged must fail loudly, not come back empty.)
	if out, err := exec.CommandContext(ctx, "fsck.ext4", "-p", img).CombinedOutput(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() > 1 { // 1: errors corrected
			return "", fmt.Errorf("workspace disk %s: fsck: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	// nosuid and nodev: nothing in a workspace may gain privileges or reach a device, even
	// if a sandbox's image lets it make such files.
	if err := d.mounter.Mount(img, target, "ext4", []string{"loop", "nosuid", "nodev", "noatime"}); err != nil {
		return "", fmt.Errorf("workspace disk %s: mount: %w", name, err)
	}
	// The empty lost+found mkfs makes would show in every workspace listing; fsck makes it
	// again if it ever needs it.
	_ = os.Remove(filepath.Join(target, "lost+found"))
	return target, nil
}

// format writes a fresh filesystem image at img: formatted under a temporary name and then
// renamed, so an image that exists is whole.
func (d *Disks) format(ctx context.Context, img string, size int64, uid, gid int) error {
	tmp := img + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create image: %w", err)
	}
	err = f.Truncate(size) // sparse: the host pays for what the sandbox writes
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("size image: %w", err)
	}
	// -m 0: no blocks reserved for root, the sandbox gets the whole size. lazy_itable_init
	// and lazy_journal_init leave the inode tables and journal unwritten (sparse) so a new
	// disk costs the host little and formats in a fraction of a second. root_owner: the
	// sandbox's user owns the workspace.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,root_owner="+strconv.Itoa(uid)+":"+strconv.Itoa(gid), tmp).CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// Synced before it takes its name: an image that exists is whole, after a power loss too.
	if err := syncFile(tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sync image: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("place image: %w", err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mounted tells whether target is a mount point (the image mounted there).
func (d *Disks) mounted(target string) (bool, error) {
	notMnt, err := d.mounter.IsLikelyNotMountPoint(target)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("workspace disk at %s: %w", target, err)
	}
	return !notMnt, nil
}

// Remove unmounts the disk of name and deletes it. A disk that is not there is not an error;
// one still in use fails and is left whole: unmounting here succeeds while another mount of
// the filesystem remains (the engine's bind of the volume, while a container holds it), so
// the image is deleted only once no loop device backs it any more.
func (d *Disks) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := d.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	target := d.Path(name)
	for range 4 { // a disk mounted twice (two racing mounts before this package locked) unmounts once per mount
		mounted, err := d.mounted(target)
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		// The loop device goes with the last unmount (mount -o loop sets autoclear).
		if err := d.mounter.Unmount(target); err != nil {
			return fmt.Errorf("workspace disk %s: unmount: %w", name, err)
		}
	}
	// The kernel may let go of an autoclear loop device a moment after the last unmount.
	for try := 0; ; try++ {
		dev := loopOf(d.image(name))
		if dev == "" {
			break
		}
		if try == 40 {
			return fmt.Errorf("workspace disk %s: still in use (%s backs another mount of it)", name, dev)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workspace disk %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = os.Remove(filepath.Join(target, marker))
	for _, p := range []string{d.image(name), d.image(name) + ".tmp", target} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("workspace disk %s: %w", name, err)
		}
	}
	_ = os.Remove(filepath.Join(d.dir, name+".lock"))
	return nil
}

// loopOf is the loop device backed by the file at path, or "".
func loopOf(path string) string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == path {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

// Names lists the disks there are (an image, or a mount point left by a crash).
func (d *Disks) Names() ([]string, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("workspace disks: %w", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".img"):
			n = strings.TrimSuffix(n, ".img")
		case e.IsDir():
		default:
			continue
		}
		if checkName(n) == nil && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names, nil
}
