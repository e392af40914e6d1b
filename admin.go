package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/sessions"
)

// adminCmd manages workspaces and API keys against the database (MANAGED_AGENT_DATABASE_URL,
// or a running dev's --data-dir), through the service the admin HTTP API uses.
func adminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage workspaces and API keys (create, list, revoke, rotate) against the database",
	}
	cmd.PersistentFlags().String("data-dir", "", "a running dev's data dir, used when MANAGED_AGENT_DATABASE_URL is not set (default ./.data)")
	cmd.PersistentFlags().Bool("json", false, "print JSON instead of a table")

	workspaces := &cobra.Command{Use: "workspaces", Short: "Create and list workspaces"}
	workspaces.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create a workspace and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, args []string) error {
			ws, err := a.Service.CreateWorkspace(cmd.Context(), a.Actor, args[0])
			if err != nil {
				return err
			}
			return printOut(cmd, ws, func(w io.Writer) { fmt.Fprintf(w, "%s\t%s\n", ws.ID, ws.Name) })
		}),
	}, &cobra.Command{
		Use:   "list",
		Short: "List workspaces",
		Args:  cobra.NoArgs,
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, _ []string) error {
			list, err := a.Service.ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			return printOut(cmd, list, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tCREATED")
				for _, ws := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\n", ws.ID, ws.Name, ws.CreatedAt.UTC().Format(time.RFC3339))
				}
			})
		}),
	})

	keys := &cobra.Command{Use: "keys", Short: "Create, list, revoke and rotate API keys"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API key for a workspace (or an admin key) and print it once",
		Args:  cobra.NoArgs,
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, _ []string) error {
			f := cmd.Flags()
			req := sessions.KeyRequest{}
			req.WorkspaceID, _ = f.GetString("workspace")
			req.Label, _ = f.GetString("label")
			req.Admin, _ = f.GetBool("admin")
			req.EnvironmentID, _ = f.GetString("environment")
			expiresIn, _ := f.GetDuration("expires-in")
			expiresAt, _ := f.GetString("expires-at")
			switch {
			case expiresIn != 0 && expiresAt != "":
				return fmt.Errorf("give --expires-in or --expires-at, not both")
			case expiresIn != 0:
				t := time.Now().Add(expiresIn)
				req.ExpiresAt = &t
			case expiresAt != "":
				t, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return fmt.Errorf("--expires-at: %w (RFC 3339, e.g. 2027-01-31T00:00:00Z)", err)
				}
				req.ExpiresAt = &t
			}
			k, err := a.Service.CreateKey(cmd.Context(), a.Actor, req)
			if err != nil {
				return err
			}
			return printOut(cmd, keyOut(k.APIKey, k.Secret), func(w io.Writer) { app.PrintKey(w, k) })
		}),
	}
	create.Flags().String("workspace", "", "the workspace id (wrkspc_…) the key acts in")
	create.Flags().String("label", "", "a label to tell keys apart (e.g. ci, alice)")
	create.Flags().Duration("expires-in", 0, "the key stops working after this long (e.g. 720h)")
	create.Flags().String("expires-at", "", "the key stops working at this time (RFC 3339)")
	create.Flags().Bool("admin", false, "an admin key: authorises the admin HTTP API, no workspace")
	create.Flags().String("environment", "", "an environment key for this self-hosted environment (env_…) of --workspace: authorises its work queue and the sessions it hands out, nothing else")

	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, _ []string) error {
			ws, _ := cmd.Flags().GetString("workspace")
			list, err := a.Service.ListKeys(cmd.Context(), ws)
			if err != nil {
				return err
			}
			out := make([]keyJSON, 0, len(list))
			for _, k := range list {
				out = append(out, keyOut(k, ""))
			}
			return printOut(cmd, out, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tKEY\tWORKSPACE\tLABEL\tSTATE\tCREATED")
				for _, k := range list {
					ws := k.WorkspaceID
					if k.Admin {
						ws = "(admin)"
					}
					if k.EnvironmentID != "" {
						ws += " (environment " + k.EnvironmentID + ")"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Hint, ws, k.Label, keyState(k), k.CreatedAt.UTC().Format(time.RFC3339))
				}
			})
		}),
	}
	list.Flags().String("workspace", "", "only this workspace's keys")

	revoke := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke a key: it is refused at once on every API process and its open streams end",
		Args:  cobra.ExactArgs(1),
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, args []string) error {
			k, err := a.Service.RevokeKey(cmd.Context(), a.Actor, args[0])
			if err != nil {
				return err
			}
			return printOut(cmd, keyOut(k, ""), func(w io.Writer) { fmt.Fprintf(w, "revoked %s (%s)\n", k.ID, k.Hint) })
		}),
	}
	rotate := &cobra.Command{
		Use:   "rotate KEY_ID",
		Short: "Create a key like KEY_ID and end KEY_ID (now, or after --grace)",
		Args:  cobra.ExactArgs(1),
		RunE: withAdmin(func(cmd *cobra.Command, a *app.Admin, args []string) error {
			grace, _ := cmd.Flags().GetDuration("grace")
			k, old, err := a.Service.RotateKey(cmd.Context(), a.Actor, args[0], grace)
			if err != nil {
				return err
			}
			return printOut(cmd, struct {
				keyJSON
				Previous keyJSON `json:"previous"`
			}{keyOut(k.APIKey, k.Secret), keyOut(old, "")}, func(w io.Writer) {
				fmt.Fprintf(w, "%s (%s) %s\n\n", old.ID, old.Hint, map[bool]string{true: "is revoked", false: "stops working at " + endOf(old)}[grace == 0])
				app.PrintKey(w, k)
			})
		}),
	}
	rotate.Flags().Duration("grace", 0, "keep the old key working this long (e.g. 1h) so clients can move over")
	keys.AddCommand(create, list, revoke, rotate)

	cmd.AddCommand(workspaces, keys)
	return cmd
}

func withAdmin(run func(cmd *cobra.Command, a *app.Admin, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c := app.FromLookup(app.Config{LogFormat: "text", LogLevel: "warn", DataDir: "./.data"}, lookup)
		if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed {
			c.DataDir = f.Value.String()
		}
		a, err := app.OpenAdmin(cmd.Context(), c)
		if err != nil {
			return err
		}
		defer a.Close()
		return run(cmd, a, args)
	}
}

// printOut prints v as JSON with --json, else as the table text writes.
func printOut(cmd *cobra.Command, v any, text func(io.Writer)) error {
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	text(tw)
	return tw.Flush()
}

type keyJSON struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	Label       string `json:"label"`
	Hint        string `json:"hint"`
	Admin       bool   `json:"admin"`
	// EnvironmentID is set on an environment key.
	EnvironmentID string     `json:"environment_id,omitempty"`
	CreatedBy     string     `json:"created_by"`
	EndedBy       string     `json:"ended_by,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at"`
	Key           string     `json:"key,omitempty"`
}

func keyOut(k sessions.APIKey, secret string) keyJSON {
	return keyJSON{ID: k.ID, WorkspaceID: k.WorkspaceID, Label: k.Label, Hint: k.Hint, Admin: k.Admin, EnvironmentID: k.EnvironmentID, CreatedBy: k.CreatedBy, EndedBy: k.EndedBy,
		CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, Key: secret}
}

func keyState(k sessions.APIKey) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
	case k.ExpiresAt != nil && !k.ExpiresAt.After(time.Now()):
		return "expired " + k.ExpiresAt.UTC().Format(time.RFC3339)
	case k.ExpiresAt != nil:
		return "active until " + k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return "active"
}

func endOf(k sessions.APIKey) string {
	if k.ExpiresAt == nil {
		return "never"
	}
	return k.ExpiresAt.UTC().Format(time.RFC3339)
}
