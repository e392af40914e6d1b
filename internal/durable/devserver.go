package durable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// devServerArgs are the fast local settings of DESIGN.md §2: the stock single-shard dev
// server adds ~45 ms to every workflow task and can stall a long poll for 20 s; these bring a
// start→activity→complete round trip to ~15–30 ms.
var devServerArgs = []string{
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "history.timerProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "history.visibilityProcessorMaxPollRPS=1000",
	"--dynamic-config-value", `history.longPollExpirationInterval="2s"`,
	// Eager activities: an activity the workflow schedules comes back in the reply to its
	// workflow task instead of through matching.
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
}

// DevServerOptions configures a local Temporal dev server.
type DevServerOptions struct {
	// DBFile persists the server's state (SQLite); empty keeps it in memory.
	DBFile string
	// UI enables the Web UI.
	UI bool
	// Output receives the server's own log; nil discards it.
	Output io.Writer
}

// DevServer is a running `temporal server start-dev`.
type DevServer struct {
	*testsuite.DevServer
}

// Stop closes the server's client, then stops the server: the SDK's Stop leaves the client's
// gRPC connection (and its goroutines) behind.
func (s *DevServer) Stop() error {
	s.Client().Close()
	return s.DevServer.Stop()
}

// FindTemporalCLI returns the Temporal CLI: bin/temporal (what `make tools` installs) in the
// working directory or the nearest parent that has one — tests run in package directories —
// then beside this executable, then PATH. The error says how to get it.
func FindTemporalCLI() (string, error) {
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, "bin", "temporal")
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	// Beside our own binary: `make build` puts both in bin/.
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "temporal")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("the Temporal CLI was not found in ./bin or on PATH: run `make tools` (installs it into ./bin), or set MANAGED_AGENT_TEMPORAL_ADDRESS to a running Temporal server")
}

// StartDevServer starts the official Temporal CLI dev server on a free local port with the
// fast settings. It never downloads anything.
func StartDevServer(ctx context.Context, opts DevServerOptions) (*DevServer, error) {
	path, err := FindTemporalCLI()
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  path,
		ClientOptions: &client.Options{Namespace: "default", Logger: quietLogger()},
		DBFilename:    opts.DBFile,
		EnableUI:      opts.UI,
		LogLevel:      "error",
		ExtraArgs:     devServerArgs,
		Stdout:        out,
		Stderr:        out,
	})
	if err != nil {
		return nil, fmt.Errorf("start Temporal dev server (%s): %w", path, err)
	}
	return &DevServer{srv}, nil
}
