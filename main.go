// Command managed-agents is the one binary of the self-hosted Managed Agents server; each
// subcommand runs one part (see DESIGN.md §2).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/store"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "managed-agents",
		Short:         "Self-hosted server for the Claude Managed Agents API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), devCmd(), workerCmd(), migrateCmd(), versionCmd(),
		notYet("controller", "Kubernetes controller for Session and SandboxBinding", "the Kubernetes operator"),
		notYet("sandboxd", "daemon inside a sandbox pod", "Kubernetes sandboxes"),
	)
	return root
}

func serveCmd() *cobra.Command {
	cfg := app.Config{Addr: ":8080", LogFormat: "json"}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the REST API and SSE streams (the API pod)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromEnv(cfg)
			overrideFlags(cmd, &c)
			logger, err := c.Logger()
			if err != nil {
				return err
			}
			api, err := app.NewAPI(cmd.Context(), c.DatabaseURL, logger)
			if err != nil {
				return err
			}
			defer api.Close()
			if c.TemporalAddress != "" {
				tc, err := connectRunner(cmd.Context(), api, c, logger)
				if err != nil {
					return err
				}
				defer tc.Close()
			} else {
				logger.Warn("MANAGED_AGENT_TEMPORAL_ADDRESS is not set: the API accepts events but no session runs until workers are configured")
			}
			if c.APIKey != "" {
				if _, err := api.BindAPIKey(cmd.Context(), c.APIKey); err != nil {
					return err
				}
			}
			ln, err := net.Listen("tcp", c.Addr)
			if err != nil {
				return fmt.Errorf("listen on %s (MANAGED_AGENT_ADDR / --addr): %w", c.Addr, err)
			}
			logger.Info("serving", "addr", ln.Addr().String(), "version", version)
			return app.Serve(cmd.Context(), ln, api.Handler, logger)
		},
	}
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_ADDR, default :8080)")
	return cmd
}

func workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run session workflows and their activities (Temporal worker)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromEnv(app.Config{LogFormat: "json"})
			logger, err := c.Logger()
			if err != nil {
				return err
			}
			if err := app.CheckSandboxGuard(c); err != nil {
				return err
			}
			api, err := app.NewAPI(cmd.Context(), c.DatabaseURL, logger)
			if err != nil {
				return err
			}
			defer api.Close()
			// The worker also signals workflows (a deleted session's run is told to end).
			tc, err := connectRunner(cmd.Context(), api, c, logger)
			if err != nil {
				return err
			}
			defer tc.Close()
			w, err := app.StartWorker(c, tc, api.Store, api.Previews, logger)
			if err != nil {
				return err
			}
			defer w.Stop()
			logger.Info("worker running", "task_queue", c.TaskQueue, "version", version)
			<-cmd.Context().Done()
			return nil
		},
	}
}

func devCmd() *cobra.Command {
	cfg := app.Config{Addr: "127.0.0.1:8080", LogFormat: "text", DataDir: "./.data"}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything a laptop needs in one process, on embedded defaults",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromEnv(cfg)
			overrideFlags(cmd, &c)
			logger, err := c.Logger()
			if err != nil {
				return err
			}
			return app.RunDev(cmd.Context(), c, logger)
		},
	}
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_ADDR, default 127.0.0.1:8080)")
	cmd.Flags().String("data-dir", "", "where the private PostgreSQL and the generated API key live (MANAGED_AGENT_DATA_DIR, default ./.data)")
	return cmd
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the SQL migrations and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromEnv(app.Config{LogFormat: "text"})
			logger, err := c.Logger()
			if err != nil {
				return err
			}
			if c.DatabaseURL == "" {
				return errors.New("MANAGED_AGENT_DATABASE_URL is not set")
			}
			st, err := store.Open(cmd.Context(), c.DatabaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			return st.Migrate(cmd.Context(), logger)
		},
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			v := version
			if info, ok := debug.ReadBuildInfo(); ok && v == "dev" && info.Main.Version != "" {
				v = info.Main.Version
			}
			fmt.Fprintln(cmd.OutOrStdout(), "managed-agents", v)
		},
	}
}

// connectRunner dials Temporal and lets the API's sessions start and signal workflows.
func connectRunner(ctx context.Context, api *app.API, c app.Config, logger *slog.Logger) (client.Client, error) {
	tc, err := app.DialTemporal(ctx, c, logger)
	if err != nil {
		return nil, err
	}
	api.UseRunner(tc, c.TaskQueue, durable.DefaultModelRetry, logger)
	return tc, nil
}

// notYet is a subcommand whose issue has not landed: it says so instead of pretending.
func notYet(name, short, issue string) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short + " (not yet implemented)",
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%s is not implemented yet: it arrives with %s", name, issue)
		},
	}
}

// overrideFlags applies flags the user set over the environment.
func overrideFlags(cmd *cobra.Command, c *app.Config) {
	if f := cmd.Flags().Lookup("addr"); f != nil && f.Changed {
		c.Addr = f.Value.String()
	}
	if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed {
		c.DataDir = f.Value.String()
	}
}
