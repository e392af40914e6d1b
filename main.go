// Command managed-agents is the one binary of the self-hosted Managed Agents server; each
// subcommand runs one part (see DESIGN.md §2).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/managed-agents/managed-agents/internal/app"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// lookup reads configuration variables; main sets it before anything else runs.
var lookup = os.LookupEnv

func main() {
	lookup = lookupEnv(hideSecrets())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A stop drains running steps (up to MANAGED_AGENT_WORKER_STOP_TIMEOUT): after the first
	// signal the default action returns, so a second Ctrl-C ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "managed-agents",
		Version:       buildVersion(),
		Short:         "Self-hosted server for the Claude Managed Agents API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), devCmd(), adminCmd(), workerCmd(), environmentWorkerCmd(), migrateCmd(), vaultRekeyCmd(), egressProxyCmd(), versionCmd(), controllerCmd(), sandboxdCmd(), installBinaryCmd(), benchCmd())
	return root
}

func serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the REST API and SSE streams (the API pod)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromLookup(app.Config{Addr: ":8080", LogFormat: "json"}, lookup)
			overrideFlags(cmd, &c)
			return app.RunServe(cmd.Context(), c, buildVersion())
		},
	}
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_ADDR, default :8080)")
	return cmd
}

func workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run session workflows and their activities (Temporal worker); needs a migrated database",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.RunWorker(cmd.Context(), app.FromLookup(app.Config{LogFormat: "json"}, lookup), buildVersion())
		},
	}
}

func environmentWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "environment-worker",
		Short: "Serve a self-hosted environment of a server from here: claim its work, run each session's tools in a sandbox of MANAGED_AGENT_SANDBOX",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.RunEnvironmentWorker(cmd.Context(), app.FromLookup(app.Config{LogFormat: "json"}, lookup), buildVersion())
		},
	}
}

func devCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything a laptop needs in one process, on embedded defaults",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromLookup(app.DevDefaults(), lookup)
			overrideFlags(cmd, &c)
			return app.RunDev(cmd.Context(), c)
		},
	}
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_ADDR, default 127.0.0.1:8080)")
	cmd.Flags().String("data-dir", "", "where the private PostgreSQL and the generated API key live (MANAGED_AGENT_DATA_DIR, default ./.data)")
	cmd.Flags().String("kubeconfig", "", "also run the Kubernetes controller against this cluster (default KUBECONFIG; none: no controller)")
	return cmd
}

func controllerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Kubernetes controller for Agent, Environment and Session resources (leader-elected); needs a migrated database",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromLookup(app.Config{LogFormat: "json", ControllerLeaderElect: true, ControllerWorkspacePerNamespace: true}, lookup)
			overrideFlags(cmd, &c)
			return app.RunController(cmd.Context(), c, buildVersion())
		},
	}
	cmd.Flags().String("kubeconfig", "", "kubeconfig of the cluster (default KUBECONFIG, else the pod's service account)")
	// The flags kubebuilder projects' managers take, so manifests written for them fit.
	cmd.Flags().Bool("leader-elect", true, "elect one active replica through a Lease (MANAGED_AGENT_CONTROLLER_LEADER_ELECT)")
	cmd.Flags().String("metrics-bind-address", "", "Prometheus metrics address, or 0 for none (MANAGED_AGENT_CONTROLLER_METRICS_ADDR; default MANAGED_AGENT_METRICS_ADDR, :9090)")
	cmd.Flags().String("health-probe-bind-address", "", "/healthz and /readyz address, or 0 for none (MANAGED_AGENT_CONTROLLER_HEALTH_ADDR, default :8081)")
	return cmd
}

func sandboxdCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandboxd",
		Short: "Serve a sandbox pod's workspace to the worker (exec, files, search) behind the sandbox's token",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromLookup(app.Config{LogFormat: "json"}, lookup)
			if f := cmd.Flags().Lookup("addr"); f.Changed {
				c.SandboxdAddr = f.Value.String()
			}
			if f := cmd.Flags().Lookup("workspace"); f.Changed {
				c.SandboxdWorkspace = f.Value.String()
			}
			stdio, _ := cmd.Flags().GetBool("stdio")
			return app.RunSandboxd(cmd.Context(), c, buildVersion(), stdio)
		},
	}
	cmd.Flags().Bool("stdio", false, "serve one connection on standard input and output instead of listening (how the docker sandbox runs it)")
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_SANDBOXD_ADDR, default :8090)")
	cmd.Flags().String("workspace", "", "the workspace directory served (MANAGED_AGENT_SANDBOXD_WORKSPACE, default /workspace)")
	return cmd
}

func installBinaryCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install-binary DEST",
		Short: "Copy this binary to DEST (the init container of a sandbox pod injects sandboxd into any image this way)",
		Args:  cobra.ExactArgs(1),
		RunE:  func(_ *cobra.Command, args []string) error { return app.InstallBinary(args[0]) },
	}
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the SQL migrations and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.RunMigrate(cmd.Context(), app.FromLookup(app.Config{LogFormat: "text"}, lookup))
		},
	}
}

func vaultRekeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "vault-rekey",
		Short: "Reseal every vault credential with the first key of MANAGED_AGENT_VAULT_KEYS (key rotation) and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.RunVaultRekey(cmd.Context(), app.FromLookup(app.Config{LogFormat: "text"}, lookup), cmd.OutOrStdout())
		},
	}
}

func egressProxyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "egress-proxy",
		Short: "Run the allowlisting egress proxy of sandboxes (the docker provider starts it in a container)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := app.FromLookup(app.Config{LogFormat: "json"}, lookup)
			if f := cmd.Flags().Lookup("addr"); f.Changed {
				c.Network.EgressAddr = f.Value.String()
			}
			return app.RunEgressProxy(cmd.Context(), c, buildVersion())
		},
	}
	cmd.Flags().String("addr", "", "listen address (MANAGED_AGENT_EGRESS_PROXY_ADDR, default :3128)")
	return cmd
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "managed-agents version", buildVersion())
		},
	}
}

// buildVersion is the one version every place prints (`version`, `--version`, the start-up
// logs): the -ldflags value if one was set, else the module version Go stamped into the build
// (a tag, or a pseudo-version from the VCS commit), else "dev".
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}

// overrideFlags applies flags the user set over the environment.
func overrideFlags(cmd *cobra.Command, c *app.Config) {
	if f := cmd.Flags().Lookup("addr"); f != nil && f.Changed {
		c.Addr = f.Value.String()
	}
	if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed {
		c.DataDir = f.Value.String()
	}
	if f := cmd.Flags().Lookup("kubeconfig"); f != nil && f.Changed {
		c.Kubeconfig = f.Value.String()
	}
	if f := cmd.Flags().Lookup("leader-elect"); f != nil && f.Changed {
		c.ControllerLeaderElect = f.Value.String() == "true"
	}
	if f := cmd.Flags().Lookup("metrics-bind-address"); f != nil && f.Changed {
		c.ControllerMetricsAddr = f.Value.String()
	}
	if f := cmd.Flags().Lookup("health-probe-bind-address"); f != nil && f.Changed {
		c.ControllerHealthAddr = f.Value.String()
	}
}
