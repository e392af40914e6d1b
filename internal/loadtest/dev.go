package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// devReadyTimeout bounds a dev start: PostgreSQL's initdb and the Temporal dev server's first
// start take most of it.
const devReadyTimeout = 2 * time.Minute

// Dev is a `managed-agents dev` the load tool started in a temporary data dir.
type Dev struct {
	URL, APIKey string
	PID         int

	cmd     *exec.Cmd
	dir     string
	logPath string
	done    chan error
}

// StartDev runs `bin dev --addr 127.0.0.1:<free port> --data-dir <temp dir>/data`, reads the
// URL and the API key it prints, and waits until /readyz answers 200. The child gets this
// process's environment with, unless it sets them, the request limits off
// (MANAGED_AGENT_RATE_LIMIT_RPS=0, MANAGED_AGENT_MAX_STREAMS_PER_KEY=0: a load run makes more
// requests and opens more streams than one key may by default) and the local sandboxes in
// the temp dir (MANAGED_AGENT_SANDBOX_DIR). Its log goes to dev.log there; Stop removes it all.
func StartDev(ctx context.Context, bin string, logger *slog.Logger) (*Dev, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "managed-agents-bench-")
	if err != nil {
		return nil, fmt.Errorf("make a data dir for dev: %w", err)
	}
	// PostgreSQL runs as its own user when we are root: it must pass through to its data dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("make a data dir for dev: %w", err)
	}
	d := &Dev{dir: dir, logPath: filepath.Join(dir, "dev.log"), done: make(chan error, 1)}
	if err := d.start(ctx, bin, addr, logger); err != nil {
		d.Stop(logger)
		return nil, err
	}
	return d, nil
}

func (d *Dev) start(ctx context.Context, bin, addr string, logger *slog.Logger) error {
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return fmt.Errorf("dev log: %w", err)
	}
	cmd := exec.Command(bin, "dev", "--addr", addr, "--data-dir", filepath.Join(d.dir, "data"))
	cmd.Env = devEnv(os.Environ(), d.dir)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return fmt.Errorf("dev stdout: %w", err)
	}
	// dev and its children end with us if we are killed before Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s dev: %w", bin, err)
	}
	d.cmd, d.PID = cmd, cmd.Process.Pid
	logger.Info("started dev", "pid", d.PID, "addr", addr, "log", d.logPath)

	printed := make(chan devBanner, 1)
	go func() {
		banner := readBanner(stdout, logFile)
		printed <- banner
		_, _ = io.Copy(logFile, stdout) // the rest, so dev never blocks on a full pipe
		d.done <- cmd.Wait()
		logFile.Close()
	}()
	ctx, cancel := context.WithTimeout(ctx, devReadyTimeout)
	defer cancel()
	select {
	case b := <-printed:
		if b.url == "" || b.key == "" {
			return fmt.Errorf("dev printed no URL and API key (its log: %s)", d.logPath)
		}
		d.URL, d.APIKey = b.url, b.key
	case <-ctx.Done():
		return fmt.Errorf("dev did not print its URL within %v (its log: %s)", devReadyTimeout, d.logPath)
	}
	return d.waitReady(ctx)
}

func (d *Dev) waitReady(ctx context.Context) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev at %s did not become ready (its log: %s): %w", d.URL, d.logPath, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends dev with SIGTERM (its graceful stop, which stops PostgreSQL and Temporal too),
// kills it after a minute, and removes the data dir.
func (d *Dev) Stop(logger *slog.Logger) {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-d.done:
			if err != nil {
				logger.Warn("dev exited with an error", "error", err, "log", d.logPath)
			}
		case <-time.After(time.Minute):
			logger.Warn("dev did not stop within a minute of SIGTERM; killing it")
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	if err := os.RemoveAll(d.dir); err != nil {
		logger.Warn("remove dev's data dir", "dir", d.dir, "error", err)
	}
}

// devBanner is what dev prints once it listens.
type devBanner struct{ url, key string }

// readBanner reads dev's stdout up to the API key line, copying it to log.
func readBanner(r io.Reader, log io.Writer) devBanner {
	var b devBanner
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		field, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.TrimSpace(value)
		switch field {
		case "URL":
			b.url = value
		case "API key":
			// "sk-… (generated; kept in the data dir)"
			b.key, _, _ = strings.Cut(value, " ")
		}
		if b.url != "" && b.key != "" {
			break
		}
	}
	return b
}

// devEnv is env with the request limits off and the local sandboxes' work directories in
// dir, unless env sets them.
func devEnv(env []string, dir string) []string {
	out := slices.Clone(env)
	for _, kv := range [][2]string{{"MANAGED_AGENT_RATE_LIMIT_RPS", "0"}, {"MANAGED_AGENT_MAX_STREAMS_PER_KEY", "0"},
		{"MANAGED_AGENT_SANDBOX_DIR", filepath.Join(dir, "sandboxes")}} {
		if !hasVar(env, kv[0]) {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	return out
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port for dev: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
