package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/packages"
	"github.com/managed-agents/managed-agents/internal/sandbox/workspace"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
)

// Defaults of `sandboxd`.
const (
	DefaultSandboxdAddr      = ":8090"
	DefaultSandboxdWorkspace = "/workspace"
)

// RunSandboxd serves the workspace of a sandbox pod (sandboxd) until ctx ends. Every setting
// is checked before the listener opens. With stdio it serves the one connection its standard
// input and output make instead, until that ends: how the docker provider runs it in a
// container (a `docker exec` per connection).
func RunSandboxd(ctx context.Context, cfg Config, version string, stdio bool) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	token, tokenErr := cfg.sandboxdToken()
	dir, dirErr := cfg.sandboxdWorkspace()
	pkgDir, pkgErr := cfg.sandboxdPackagesDir()
	if err := errors.Join(tokenErr, dirErr, pkgErr); err != nil {
		return err
	}
	env := commandEnv(os.Environ(), dir)
	if pkgDir != "" {
		env = packages.UserEnv(env, pkgDir)
	}
	ws, err := workspace.New(dir, workspace.Config{
		Env:       env,
		Timeout:   local.DefaultTimeout,
		MaxOutput: local.DefaultMaxOutput,
	})
	if err != nil {
		return err
	}
	srv, err := sandboxd.New(sandboxd.Config{Sandbox: ws, Token: token, Logger: logger})
	if err != nil {
		return err
	}
	if stdio {
		// One connection on stdin and stdout (the docker provider's exec), nothing listening;
		// one P is plenty for one connection, and fewer threads count against the
		// container's pids limit.
		runtime.GOMAXPROCS(1)
		conn, err := sandboxd.StdioConn()
		if err != nil {
			return err
		}
		return srv.ServeConn(ctx, conn)
	}
	addr := orDefault(cfg.SandboxdAddr, DefaultSandboxdAddr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (MANAGED_AGENT_SANDBOXD_ADDR): %w", addr, err)
	}
	logger.Info("sandboxd listening", "addr", ln.Addr().String(), "workspace", dir, "version", version)
	return srv.Serve(ctx, ln)
}

// commandEnv is the environment of the pod's commands: the container's own (the image's PATH,
// the template's variables), without any of ours (the token above all), HOME defaulting to
// the workspace.
func commandEnv(environ []string, dir string) []string {
	var env []string
	home := ""
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MANAGED_AGENT_") {
			continue
		}
		if name == "HOME" {
			home = value
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+cmp.Or(home, dir))
}
