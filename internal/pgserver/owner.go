package pgserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverUser is the account the PostgreSQL binaries run as. initdb and postgres refuse to
// run as root, so as root we switch to the `postgres` account (created by Debian's package)
// or, failing that, `nobody`; otherwise the binaries run as ourselves.
type serverUser struct {
	name     string
	uid, gid uint32
	switched bool // the binaries run under a different uid than this process
}

func resolveServerUser() (*serverUser, error) {
	if os.Geteuid() != 0 {
		return &serverUser{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}, nil
	}
	var lookupErrs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			lookupErrs = append(lookupErrs, err)
			continue
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
		}
		return &serverUser{name: name, uid: uint32(uid), gid: uint32(gid), switched: true}, nil
	}
	return nil, fmt.Errorf("running as root, and PostgreSQL refuses to: no `postgres` or `nobody` user to run it as: %w",
		errors.Join(lookupErrs...))
}

// sysProcAttr puts the child in its own process group, so a Ctrl-C at the terminal reaches
// only us and we shut the server down after the code that uses it, and asks the kernel to
// send a fast-shutdown signal if we die without stopping it, so no orphan server holds the
// data directory. Go applies Pdeathsig after the credential switch, which would clear it.
func (u *serverUser) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	if u.switched {
		attr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
	}
	return attr
}

// ownDir makes dir (created if missing) a directory the server user owns with mode 0700,
// as PostgreSQL requires of its data and socket directories, and reachable through its
// ancestors (see requireReachable).
func (u *serverUser) ownDir(dir string, logger *slog.Logger) error {
	created, err := mkdirParents(filepath.Dir(dir))
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if u.switched {
		if err := os.Chown(dir, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("chown %s to %s: %w", dir, u.name, err)
		}
		if err := u.requireReachable(dir, created, logger); err != nil {
			return err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// mkdirParents creates dir and its missing parents and returns the ones it created.
func mkdirParents(dir string) (map[string]bool, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		missing = append(missing, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	created := map[string]bool{}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", missing[i], err)
		}
		created[missing[i]] = true
	}
	return created, nil
}

// requireReachable checks that the server user can pass through each ancestor of dir. One it
// cannot pass is given search permission (never read) only if we created it just now; any
// other is not ours to change (/root, a home directory, a directory made private on
// purpose), so the error says what the user can do instead.
func (u *serverUser) requireReachable(dir string, created map[string]bool, logger *slog.Logger) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if !u.canSearch(info) {
			if !created[p] {
				return fmt.Errorf("running as root, PostgreSQL runs as user %s (it refuses to run as root), which cannot pass through %s (mode %04o) to reach %s. "+
					"Choose a data directory whose parents others may pass through (for example --data-dir /var/lib/managed-agents or MANAGED_AGENT_DATA_DIR), "+
					"allow it yourself (chmod o+x %s), or run as a user other than root",
					u.name, p, info.Mode().Perm(), dir, p)
			}
			mode := info.Mode().Perm() | 0o001
			logger.Debug("granting search permission to others on a directory we created, so the PostgreSQL server user can reach its directory",
				"dir", p, "mode", fmt.Sprintf("%04o", mode), "server_user", u.name)
			if err := os.Chmod(p, mode); err != nil {
				return fmt.Errorf("chmod %s so user %s can reach %s: %w", p, u.name, dir, err)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// canSearch applies the owner/group/other rule; supplementary groups and ACLs are ignored,
// which at worst grants a search bit that was not needed.
func (u *serverUser) canSearch(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	mode := info.Mode().Perm()
	switch {
	case !ok:
		return true
	case st.Uid == u.uid:
		return mode&0o100 != 0
	case st.Gid == u.gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

// adoptCluster hands an existing cluster to the server user when it belongs to someone
// else, e.g. one first created by a non-root run of the same program.
func (u *serverUser) adoptCluster(dir string, logger *slog.Logger) error {
	if !u.switched {
		return nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == u.uid {
		return u.requireReachable(dir, nil, logger)
	}
	logger.Warn("changing the owner of the PostgreSQL data directory to the server user", "dir", dir, "server_user", u.name)
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(u.uid), int(u.gid))
	})
	if err != nil {
		return fmt.Errorf("chown %s to %s: %w", dir, u.name, err)
	}
	return u.requireReachable(dir, nil, logger)
}

// relocatedHome holds the clusters of data directories the server user cannot reach; a
// variable so tests can move it.
var relocatedHome = "/var/lib/managed-agents/clusters"

// relocatedClusterDir is where the cluster of dataDir lives when the server user cannot reach
// dataDir: one directory per data directory (a hash of its absolute path), so a restart of the
// same data directory finds its cluster again and two data directories never share one.
func relocatedClusterDir(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join(relocatedHome, hex.EncodeToString(sum[:8]))
}

// blockedAncestor is the first existing ancestor of dir that the server user cannot pass
// through, or "" if it can reach dir (ancestors still missing are created passable).
func (u *serverUser) blockedAncestor(dir string) string {
	if !u.switched {
		return ""
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if info, err := os.Stat(p); err == nil && !u.canSearch(info) {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}
