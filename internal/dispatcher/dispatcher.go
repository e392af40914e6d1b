// Package dispatcher is `managed-agents environment-worker`: it serves a self-hosted
// environment of a managed-agents (or hosted) server from another network or cluster, running
// each claimed session's built-in tools in a sandbox of one of this project's providers
// (docker, kubernetes pods, the remote ones), one sandbox per session, as Anthropic's own
// self-hosted dispatcher does (docs/self-hosted-environments.md).
//
// The queue protocol — poll, ack, the lease's heartbeats, the session's event stream, posting
// results, the force-stop — is the official SDK's (lib/environments): this package supplies
// only the tools and the sandbox they run in. It imports sandbox and tools, never the server's
// store, sessions, turns or Temporal: a dispatcher needs nothing but the server's URL and an
// environment key.
package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Config is a dispatcher's configuration.
type Config struct {
	// Client reaches the server (its base URL); the environment key authorises every call.
	Client         anthropic.Client
	EnvironmentID  string
	EnvironmentKey string
	// WorkerID names this dispatcher to the server's statistics (default: host and a random
	// suffix, the SDK's).
	WorkerID string
	// Provider makes the sessions' sandboxes.
	Provider sandbox.Provider
	// Egress is the network each sandbox gets.
	Egress sandbox.Egress
	// Concurrency is how many sessions are served at once (default 4).
	Concurrency int
	// MaxIdle is how long a session's runner stays after its turn ended before the item is
	// stopped (the SDK's default, 60 s, when zero).
	MaxIdle time.Duration
	Logger  *slog.Logger
}

// Dispatcher claims work and serves each session in its own sandbox.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// sandboxes are the sessions' sandboxes this dispatcher made and has not destroyed, and
	// serving counts the items of each session being served now.
	sandboxes map[string]*sessionSandbox
	serving   map[string]int
}

// sweepInterval is how often the sandboxes of sessions not being served are checked: one whose
// session was deleted or terminated since its last item goes.
const sweepInterval = time.Minute

// New checks cfg and makes a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	switch {
	case cfg.EnvironmentID == "":
		return nil, errors.New("dispatcher: the environment id is required")
	case cfg.EnvironmentKey == "":
		return nil, errors.New("dispatcher: the environment key is required")
	case cfg.Provider == nil:
		return nil, errors.New("dispatcher: a sandbox provider is required")
	}
	cfg.Concurrency = cmp.Or(max(cfg.Concurrency, 0), 4)
	log := cmp.Or(cfg.Logger, slog.Default()).With("environment_id", cfg.EnvironmentID, "provider", cfg.Provider.Name())
	return &Dispatcher{cfg: cfg, log: log, sandboxes: map[string]*sessionSandbox{}, serving: map[string]int{}}, nil
}

// Run polls until ctx ends (nil) or the server refuses the key for good (the error). Sessions
// being served when ctx ends are left to their leases: the server reclaims them.
func (d *Dispatcher) Run(ctx context.Context) error {
	poller := environments.NewWorkPoller(ctx, d.cfg.Client, environments.WorkPollerOptions{
		EnvironmentID: d.cfg.EnvironmentID, EnvironmentKey: d.cfg.EnvironmentKey, WorkerID: d.cfg.WorkerID,
		// Each item is stopped by its own handler (EnvironmentWorker.HandleItem), not when
		// the poller moves on: several are served at once.
		AutoStop: param.NewOpt(false), Logger: d.log,
	})
	defer poller.Close()
	slots := make(chan struct{}, d.cfg.Concurrency)
	var serving sync.WaitGroup
	defer serving.Wait()
	sweeping, stopSweeping := context.WithCancel(ctx)
	defer stopSweeping() // before the Wait above: the sweep ends with Run, whatever ends it
	serving.Go(func() { d.sweep(sweeping) })
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if !poller.Next() {
			<-slots
			return poller.Err()
		}
		work := *poller.Current()
		serving.Go(func() {
			defer func() { <-slots }()
			d.serve(ctx, work)
		})
	}
}

// serve runs one claimed item: the SDK's per-item flow (lease, session runner, force-stop)
// with this session's sandbox tools.
func (d *Dispatcher) serve(ctx context.Context, work anthropic.BetaSelfHostedWork) {
	log := d.log.With("work_id", work.ID, "session_id", work.Data.ID)
	sb := d.begin(work.Data.ID)
	ended := false
	end := func() {
		if !ended {
			ended = true
			d.end(work.Data.ID)
		}
	}
	defer end()
	workdir, err := os.MkdirTemp("", "managed-agents-worker-")
	if err != nil {
		log.Error("cannot make the item's scratch directory", "error", err)
		return
	}
	defer os.RemoveAll(workdir)
	opts := environments.EnvironmentWorkerOptions{
		EnvironmentKey: d.cfg.EnvironmentKey, Workdir: workdir, Tools: sandboxTools(sb), Logger: log,
		// Memory stores are not served by this dispatcher yet: run without them rather than
		// fail the item.
		MemorySyncInterval: -1,
	}
	if d.cfg.MaxIdle > 0 {
		opts.MaxIdle = &d.cfg.MaxIdle
	}
	err = environments.NewEnvironmentWorker(d.cfg.Client, opts).HandleItem(ctx, environments.HandleItemOptions{
		WorkID: work.ID, EnvironmentID: work.EnvironmentID, SessionID: work.Data.ID, WorkSecret: work.Secret,
		EnvironmentKey: d.cfg.EnvironmentKey,
	})
	if err != nil {
		log.Warn("work item ended with an error", "error", err)
	}
	end() // before the check: an item being served keeps its session's sandbox
	if string(work.Data.Type) == "session" {
		d.destroyIfOver(context.WithoutCancel(ctx), work.Data.ID, sb)
	}
}

// begin returns the session's sandbox handle (one per session while the dispatcher runs) and
// counts the item as being served.
func (d *Dispatcher) begin(sessionID string) *sessionSandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving[sessionID]++
	sb := d.sandboxes[sessionID]
	if sb == nil {
		sb = &sessionSandbox{provider: d.cfg.Provider, egress: d.cfg.Egress, sessionID: sessionID}
		d.sandboxes[sessionID] = sb
	}
	return sb
}

func (d *Dispatcher) end(sessionID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.serving[sessionID]--; d.serving[sessionID] <= 0 {
		delete(d.serving, sessionID)
	}
}

// destroyIfOver destroys the session's sandbox when the session is deleted or terminated and
// no item of it is being served.
func (d *Dispatcher) destroyIfOver(ctx context.Context, sessionID string, sb *sessionSandbox) {
	if !d.sessionOver(ctx, sessionID) {
		return
	}
	d.mu.Lock()
	busy := d.serving[sessionID] > 0
	if !busy {
		delete(d.sandboxes, sessionID)
	}
	d.mu.Unlock()
	if busy {
		return
	}
	if err := sb.destroy(ctx); err != nil {
		d.log.Warn("cannot destroy the session's sandbox", "session_id", sessionID, "error", err)
	}
}

// sweep destroys, every sweepInterval, the sandboxes of sessions deleted or terminated while
// no item of theirs was served. Sandboxes a previous dispatcher process made are not known
// here: the provider's own expiry (remote providers) or an operator cleans those up.
func (d *Dispatcher) sweep(ctx context.Context) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		idle := map[string]*sessionSandbox{}
		for id, sb := range d.sandboxes {
			if d.serving[id] == 0 {
				idle[id] = sb
			}
		}
		d.mu.Unlock()
		for id, sb := range idle {
			d.destroyIfOver(ctx, id, sb)
		}
	}
}

// sessionOver reports whether the session is deleted or terminated, so its sandbox can go. A
// session that may run again keeps it: its next item adopts it (Create is idempotent on the
// session's sandbox name), workspace and all.
func (d *Dispatcher) sessionOver(ctx context.Context, sessionID string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := d.cfg.Client.Beta.Sessions.Get(ctx, sessionID, anthropic.BetaSessionGetParams{},
		option.WithHeaderDel("X-Api-Key"), option.WithAuthToken(d.cfg.EnvironmentKey))
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		return true
	}
	return err == nil && sess.Status == anthropic.BetaManagedAgentsSessionStatusTerminated
}

// sessionSandbox is a session's sandbox, made on its first tool call.
type sessionSandbox struct {
	provider  sandbox.Provider
	egress    sandbox.Egress
	sessionID string

	mu  sync.Mutex
	ref *sandbox.Ref
	sb  sandbox.Sandbox
}

func (s *sessionSandbox) get(ctx context.Context) (sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sb != nil {
		return s.sb, nil
	}
	ref, err := s.provider.Create(ctx, sandbox.Spec{Name: sandbox.NameFor(s.sessionID), SessionID: s.sessionID, Egress: s.egress})
	if err != nil {
		return nil, fmt.Errorf("create the sandbox of session %s: %w", s.sessionID, err)
	}
	sb, err := s.provider.Attach(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("attach the sandbox of session %s: %w", s.sessionID, err)
	}
	s.ref, s.sb = &ref, sb
	return sb, nil
}

func (s *sessionSandbox) destroy(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := s.ref
	if ref == nil {
		// Made by an earlier item of the session, perhaps: Create adopts it, then it goes.
		r, err := s.provider.Create(ctx, sandbox.Spec{Name: sandbox.NameFor(s.sessionID), SessionID: s.sessionID, Egress: s.egress})
		if err != nil {
			return err
		}
		ref = &r
	}
	s.ref, s.sb = nil, nil
	return s.provider.Destroy(ctx, *ref)
}

// sandboxTools are the built-in tools of agent_toolset_20260401 that run in a sandbox, run by
// this project's own implementations (internal/tools) in the session's sandbox.
func sandboxTools(sb *sessionSandbox) []anthropic.BetaTool {
	names := []string{wire.ToolNameBash, wire.ToolNameRead, wire.ToolNameWrite, wire.ToolNameEdit, wire.ToolNameGlob, wire.ToolNameGrep}
	out := make([]anthropic.BetaTool, len(names))
	for i, n := range names {
		out[i] = builtinTool{name: n, sb: sb}
	}
	return out
}

type builtinTool struct {
	name string
	sb   *sessionSandbox
}

func (t builtinTool) Name() string { return t.name }
func (t builtinTool) Description() string {
	return "the built-in " + t.name + " tool, in the session's sandbox"
}

// InputSchema is not read: the server's agent declares the toolset, and the session's runner
// matches calls by name.
func (t builtinTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{}
}

// Execute runs the call in the session's sandbox. A failed call returns its text as the error:
// the SDK's runner posts it as an is_error result.
func (t builtinTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	sb, err := t.sb.get(ctx)
	if err != nil {
		return nil, err
	}
	res := tools.RunBuiltin(ctx, sb, t.name, input)
	if res.IsError {
		return nil, errors.New(res.Text)
	}
	return resultBlocks(res), nil
}

// resultBlocks turns a tool result into the SDK's blocks: its content blocks (an image or a
// document read) when it has them, else its text.
func resultBlocks(res tools.Result) []anthropic.BetaToolResultBlockParamContentUnion {
	if len(res.Content) > 0 {
		raw, err := json.Marshal(res.Content)
		var blocks []anthropic.BetaToolResultBlockParamContentUnion
		if err == nil && json.Unmarshal(raw, &blocks) == nil && len(blocks) == len(res.Content) {
			return blocks
		}
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: res.Text}}}
}
