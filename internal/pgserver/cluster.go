package pgserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// superuser is the role initdb creates; every URL we hand out connects as it.
const superuser = "postgres"

// hasCluster reports whether dir holds an initialized cluster. An existing directory that is
// neither empty nor a cluster is an error: initdb would refuse it, and silently using some
// other directory would hide the user's data.
func hasCluster(dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return true, nil
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read data directory: %w", err)
	case len(entries) > 0:
		return false, fmt.Errorf("data directory %s is not empty and holds no PostgreSQL cluster (no PG_VERSION): empty it or choose another directory", dir)
	}
	return false, nil
}

// initCluster runs initdb for dataDir. When dataDir does not exist yet the cluster is built
// beside it and renamed into place, so an initdb killed halfway never leaves a directory
// that looks like a cluster; an existing empty directory (a mount point, say) is
// initialized in place and emptied again on failure.
func initCluster(ctx context.Context, binDir, dataDir string, u *serverUser, fast bool, logger *slog.Logger) error {
	target := dataDir
	_, err := os.Stat(dataDir)
	inPlace := err == nil
	if !inPlace {
		target = dataDir + ".initdb"
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("remove leftover %s: %w", target, err)
		}
	}
	if err := u.ownDir(target, logger); err != nil {
		return err
	}
	args := []string{
		"--pgdata=" + target,
		"--username=" + superuser,
		"--auth=trust",
		"--encoding=UTF8",
		// The C locale exists everywhere and makes text ordering independent of the host.
		"--no-locale",
		"--no-instructions",
	}
	if fast {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = "/" // our working directory may be unreadable for the server user
	cmd.Env = serverEnv()
	cmd.SysProcAttr = u.sysProcAttr()
	// initdb runs postgres in bootstrap mode as its child: a cancel must end them both.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup(target, inPlace)
		return fmt.Errorf("initdb %s: %w\n%s", dataDir, err, strings.TrimSpace(string(out)))
	}
	if !inPlace {
		if err := os.Rename(target, dataDir); err != nil {
			cleanup(target, false)
			return fmt.Errorf("move initialized cluster into place: %w", err)
		}
	}
	return nil
}

func cleanup(dir string, keepDir bool) {
	if !keepDir {
		_ = os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// serverEnv is our environment without the libpq variables: postgres reads PGPORT as its
// default port, and the others only confuse a server that is configured by flags.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// clearStaleLock removes a lock file (postmaster.pid, or the socket's .lock) left behind by
// a server that is gone. PostgreSQL only removes such a file itself when the pid in it is
// not alive, which a reused pid (a restarted container, or any process of another user when
// we run the server as `postgres`) defeats. A lock whose pid is a live process working in
// dataDir is a real server, and we refuse to start a second one.
func clearStaleLock(lockPath, dataDir string, logger *slog.Logger) error {
	f, err := os.Open(lockPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", lockPath, err)
	}
	line, _ := bufio.NewReader(f).ReadString('\n')
	_ = f.Close()
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err == nil && pid > 0 && processRunsIn(pid, dataDir) {
		return fmt.Errorf("a PostgreSQL server (pid %d) is already running in %s: stop it first", pid, dataDir)
	}
	logger.Warn("removing a stale PostgreSQL lock file left by a server that is gone", "path", lockPath, "pid", pid)
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", lockPath, err)
	}
	return nil
}

// processRunsIn reports whether pid is alive with dataDir as its working directory, which is
// true of a postmaster and all its children. A process we may not inspect is not ours: as
// root we can inspect any, and otherwise our servers run as ourselves.
func processRunsIn(pid int, dataDir string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		want = dataDir
	}
	return cwd == want
}
