package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/managed-agents/managed-agents/internal/loadtest"
)

func benchCmd() *cobra.Command {
	var (
		baseURL, apiKey, scenarios, jsonPath string
		cfg                                  loadtest.Config
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive a server through the public API with the official Go SDK and measure it (latency, throughput, CPU and memory)",
		Long: `bench runs N sessions at once, each sending M turns of a scenario with its SSE stream open,
and prints turn latency (POST → session.status_idle), the POST's acknowledgement, throughput,
commit-to-delivery on the streams, errors and, when the server runs on this machine (the dev it
starts, or --pid), CPU per turn and peak RSS of the server, PostgreSQL and Temporal.

Without --base-url it starts ` + "`managed-agents dev`" + ` in a temporary data dir (request limits off)
and stops it at the end. Scenarios (the fake model's directives): plain (a message it echoes),
tool (one bash true), tools3 (three in one response), confirm (one bash call under always_ask,
allowed by a user.tool_confirmation), custom (a custom tool answered by user.custom_tool_result).
See docs/performance.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			var err error
			if cfg.Scenarios, err = loadtest.ParseScenarios(scenarios); err != nil {
				return err
			}
			if cfg.Sessions < 0 || cfg.Turns < 0 || cfg.Fanout < 0 || cfg.Idle < 0 {
				return errors.New("--sessions, --turns, --fanout and --idle must not be negative")
			}
			cfg.BaseURL, cfg.APIKey, cfg.Logger, cfg.Progress = baseURL, apiKey, logger, cmd.ErrOrStderr()
			if cfg.APIKey == "" {
				cfg.APIKey, _ = lookup("MANAGED_AGENT_API_KEY")
			}
			switch {
			case cfg.BaseURL == "":
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary to start dev: %w", err)
				}
				dev, err := loadtest.StartDev(ctx, self, logger)
				if err != nil {
					return err
				}
				defer dev.Stop(logger)
				cfg.BaseURL, cfg.APIKey, cfg.ServerPID = dev.URL, dev.APIKey, dev.PID
				cfg.Server = "dev started by bench"
			case cfg.APIKey == "":
				return errors.New("--api-key (or MANAGED_AGENT_API_KEY) is needed with --base-url")
			case cfg.ServerPID != 0:
				cfg.Server = fmt.Sprintf("external, pid %d", cfg.ServerPID)
			default:
				cfg.Server = "external"
			}
			rep, runErr := loadtest.Run(ctx, cfg)
			if rep == nil {
				return runErr
			}
			if err := loadtest.WriteTable(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if jsonPath != "" {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("write --json: %w", err)
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&baseURL, "base-url", "", "the server's URL (default: start `managed-agents dev` in a temporary data dir and stop it at the end)")
	f.StringVar(&apiKey, "api-key", "", "API key (default MANAGED_AGENT_API_KEY; the dev bench starts prints its own)")
	f.IntVar(&cfg.Sessions, "sessions", 1, "sessions running turns at once (0: none, e.g. with --idle alone)")
	f.IntVar(&cfg.Turns, "turns", 10, "turns each session runs")
	f.StringVar(&scenarios, "scenario", "plain", "what a turn does: plain, tool, tools3, confirm or custom; a comma-separated list runs each in turn")
	f.IntVar(&cfg.Fanout, "fanout", 0, "extra SSE subscribers per session (they measure commit-to-delivery too)")
	f.IntVar(&cfg.Idle, "idle", 0, "first open this many sessions (one plain turn each, stream open), report the memory they hold, and keep them open through the run")
	f.BoolVar(&cfg.Warmup, "warmup", false, "run one untimed turn on every session before the clock starts (workflow and sandbox already there)")
	f.DurationVar(&cfg.TurnTimeout, "turn-timeout", time.Minute, "a turn not idle by then ends its session with a timeout error")
	f.DurationVar(&cfg.Think, "think", 0, "how long each session waits after a turn before the next, like a user (first turns spread over it); 0: at once, as fast as the server allows")
	f.IntVar(&cfg.ServerPID, "pid", 0, "the server's process id, when --base-url is a server on this machine: CPU and memory of it and its children")
	f.StringVar(&jsonPath, "json", "", "also write the report as JSON to this file")
	return cmd
}
