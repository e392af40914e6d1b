package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/credentials"
	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcpsession"
	"github.com/managed-agents/managed-agents/internal/netguard"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

// MCPConfig bounds the worker's connections to agents' MCP servers.
type MCPConfig struct {
	// ConnectTimeout bounds connecting to and listing one server
	// (MANAGED_AGENT_MCP_CONNECT_TIMEOUT, default 15s, at most 2m).
	ConnectTimeout time.Duration
	// CallTimeout cuts one tool call; the model gets an error result
	// (MANAGED_AGENT_MCP_CALL_TIMEOUT, default 60s, at most 10m: a step's own limit is 15m).
	CallTimeout time.Duration
	// MaxOutputChars caps the text of one tool result (MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS,
	// default 100000).
	MaxOutputChars int
	// AllowPrivateNetworks lets the worker connect to MCP servers on loopback, private,
	// link-local and other non-public addresses (MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS, a
	// boolean, default off): an agent's author names the URLs, and the worker must not become
	// their way into the cluster's own services unless the deployment says so.
	AllowPrivateNetworks bool
}

// maxMCPCallTimeout keeps a call inside the step that runs it (durable's 15-minute
// start-to-close timeout), with room for connecting and recording the result.
const maxMCPCallTimeout = 10 * time.Minute

// maxMCPConnectTimeout bounds the wait for one server at the start of every turn (a listing
// may wait for it up to three times: connect, list, connect again after a token refresh).
const maxMCPConnectTimeout = 2 * time.Minute

func (c *Config) mcpFromEnv(get func(string) string) {
	c.envDuration(&c.MCP.ConnectTimeout, "MANAGED_AGENT_MCP_CONNECT_TIMEOUT", get("MANAGED_AGENT_MCP_CONNECT_TIMEOUT"), "15s")
	c.envDuration(&c.MCP.CallTimeout, "MANAGED_AGENT_MCP_CALL_TIMEOUT", get("MANAGED_AGENT_MCP_CALL_TIMEOUT"), "60s")
	c.envBool(&c.MCP.AllowPrivateNetworks, "MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS", get("MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS"))
	if v := get("MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			c.unparsed["MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS"] = fmt.Sprintf("MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS=%q: must be a whole number such as 100000", v)
		}
		c.MCP.MaxOutputChars = n
	}
}

func (c Config) validateMCP() error {
	var errs []error
	for _, name := range []string{"MANAGED_AGENT_MCP_CONNECT_TIMEOUT", "MANAGED_AGENT_MCP_CALL_TIMEOUT", "MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS", "MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS"} {
		if err := c.parsed(name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.MCP.ConnectTimeout < 0 || c.MCP.ConnectTimeout > maxMCPConnectTimeout {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_MCP_CONNECT_TIMEOUT=%s: must be between 0 (the default, %s) and %s", c.MCP.ConnectTimeout, mcp.DefaultConnectTimeout, maxMCPConnectTimeout))
	}
	if c.MCP.CallTimeout < 0 || c.MCP.CallTimeout > maxMCPCallTimeout {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_MCP_CALL_TIMEOUT=%s: must be between 0 (the default, %s) and %s", c.MCP.CallTimeout, mcp.DefaultCallTimeout, maxMCPCallTimeout))
	}
	if c.MCP.MaxOutputChars < 0 {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_MCP_MAX_OUTPUT_CHARS=%d: must not be negative", c.MCP.MaxOutputChars))
	}
	return errors.Join(errs...)
}

// mcpConnector is the worker's MCP connector: calls claimed through claims, tokens from the
// sessions' vaults.
func (c Config) mcpConnector(tokens mcpsession.Tokens, claims mcpsession.Claims, logger *slog.Logger) *mcpsession.Connector {
	return mcpsession.New(mcpsession.Config{
		HTTPClient:     &http.Client{Transport: c.mcpTransport()},
		ConnectTimeout: c.MCP.ConnectTimeout,
		CallTimeout:    c.MCP.CallTimeout,
		MaxOutputChars: c.MCP.MaxOutputChars,
	}, tokens, claims, logger)
}

// mcpTransport carries the worker's requests to MCP servers and OAuth token endpoints. Every
// connection goes through the address guard web_fetch uses: it checks the address each dial
// resolves to (redirects and DNS answers included). A proxy would hide the final address from
// it, so proxy variables are honoured only where private networks are allowed anyway (a
// deployment whose only way out is a proxy sets MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS).
func (c Config) mcpTransport() *http.Transport {
	t := netguard.Config{AllowPrivateNetworks: c.MCP.AllowPrivateNetworks}.Transport()
	if c.MCP.AllowPrivateNetworks {
		t.Proxy = http.ProxyFromEnvironment
	}
	return t
}

// vaultTokens gives the MCP connector the sessions' vault credentials.
type vaultTokens struct{ r *credentials.Resolver }

func (v vaultTokens) Token(ctx context.Context, sessionID, serverURL string) (mcpsession.Token, error) {
	t, err := v.r.MCPToken(ctx, sessionID, serverURL)
	if errors.Is(err, credentials.ErrNoCredential) {
		return mcpsession.Token{}, mcpsession.ErrNoToken
	}
	if err != nil {
		return mcpsession.Token{}, credentialError(err)
	}
	return mcpsession.Token{Value: t.Value, CredentialID: t.CredentialID, Refreshable: t.Refreshable}, nil
}

// credentialError marks the errors that are the credential's fault (it does not decrypt, it
// has no refresh, its refresh failed) for the connector, which reports them as authentication
// failures; anything else (the database) is not the credential's.
func credentialError(err error) error {
	var rerr *credentials.RefreshError
	if errors.As(err, &rerr) || errors.Is(err, secretbox.ErrOpen) || errors.Is(err, secretbox.ErrNoKeys) || errors.Is(err, credentials.ErrNotRefreshable) {
		return fmt.Errorf("%w: %w", mcpsession.ErrCredentialUnusable, err)
	}
	return err
}

func (v vaultTokens) Refresh(ctx context.Context, sessionID, credentialID, refused string) (mcpsession.Token, error) {
	t, err := v.r.ReplaceRefusedMCPToken(ctx, sessionID, credentialID, refused)
	if err != nil {
		return mcpsession.Token{}, credentialError(err)
	}
	return mcpsession.Token{Value: t.Value, CredentialID: t.CredentialID, Refreshable: t.Refreshable}, nil
}
