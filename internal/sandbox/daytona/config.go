package daytona

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// The worker variables this provider reads.
const (
	EnvAPIURL       = "MANAGED_AGENT_DAYTONA_API_URL"
	EnvAPIKey       = "MANAGED_AGENT_DAYTONA_API_KEY"
	EnvOrganization = "MANAGED_AGENT_DAYTONA_ORGANIZATION_ID"
	EnvSnapshot     = "MANAGED_AGENT_DAYTONA_SNAPSHOT"
	EnvTarget       = "MANAGED_AGENT_DAYTONA_TARGET"
	EnvAutoStop     = "MANAGED_AGENT_DAYTONA_AUTO_STOP_MINUTES"
	EnvAutoArchive  = "MANAGED_AGENT_DAYTONA_AUTO_ARCHIVE_MINUTES"
	EnvAutoDelete   = "MANAGED_AGENT_DAYTONA_AUTO_DELETE_MINUTES"
	EnvUser         = "MANAGED_AGENT_DAYTONA_USER"
	EnvWorkspace    = "MANAGED_AGENT_DAYTONA_WORKSPACE"
	EnvDeployment   = "MANAGED_AGENT_DAYTONA_DEPLOYMENT"
	EnvReadyTimeout = "MANAGED_AGENT_DAYTONA_READY_TIMEOUT"
)

// Settings are the variables app hands to ConfigFrom.
var Settings = []string{EnvAPIURL, EnvAPIKey, EnvOrganization, EnvSnapshot, EnvTarget, EnvAutoStop, EnvAutoArchive,
	EnvAutoDelete, EnvUser, EnvWorkspace, EnvDeployment, EnvReadyTimeout}

// Defaults of Config.
const (
	DefaultAPIURL       = "https://app.daytona.io/api"
	DefaultDeployment   = "default"
	DefaultReadyTimeout = 3 * time.Minute
	DefaultTimeout      = 120 * time.Second
	DefaultMaxOutput    = 1 << 20
)

// Config configures a Provider.
type Config struct {
	// APIURL is the control plane (MANAGED_AGENT_DAYTONA_API_URL, default
	// https://app.daytona.io/api); APIKey its Bearer credential (an API key, or a JWT together
	// with OrganizationID, sent as X-Daytona-Organization-ID).
	APIURL         *url.URL
	APIKey         string
	OrganizationID string
	// Snapshot is what sandboxes of environments that name no image start from ("" is
	// Daytona's default snapshot); Target the region ("" is the organization's default).
	Snapshot, Target string
	// AutoStop, AutoArchive and AutoDelete are Daytona's lifecycle intervals in minutes; nil
	// leaves Daytona's defaults (stop after 15 idle minutes, archive after 7 days stopped,
	// never delete).
	AutoStop, AutoArchive, AutoDelete *int
	// User is the sandbox's OS user ("" is the snapshot's).
	User string
	// Workspace is the absolute directory paths are relative to; "" asks each sandbox's
	// toolbox for its working directory (GET /work-dir).
	Workspace string
	// Deployment labels every sandbox, so deployments sharing an organization keep apart.
	Deployment string
	// ReadyTimeout bounds how long Create and Attach wait for a sandbox to be started.
	ReadyTimeout time.Duration
	// PollInterval is how often a wait reads the sandbox (default 500ms).
	PollInterval time.Duration
	// Timeout and MaxOutput are the defaults of commands that set none.
	Timeout   time.Duration
	MaxOutput int
	// Retry bounds the retries of refused requests (zero: remote.DefaultRetry).
	Retry remote.Retry
	// Transport is the HTTP transport (nil: remote.NewClient's).
	Transport http.RoundTripper
	Logger    *slog.Logger
}

var deploymentPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ConfigFrom reads the provider's variables (a map of Settings) and reports every problem,
// each naming its variable; nothing reaches Daytona.
func ConfigFrom(env map[string]string) (Config, error) {
	s := remote.NewSettings(env)
	c := Config{
		APIURL:         s.URL(EnvAPIURL, DefaultAPIURL),
		APIKey:         s.Required(EnvAPIKey, "the Daytona API key (or a JWT with "+EnvOrganization+") that creates and runs the sandboxes"),
		OrganizationID: s.String(EnvOrganization, ""),
		Snapshot:       s.String(EnvSnapshot, ""),
		Target:         s.String(EnvTarget, ""),
		User:           s.String(EnvUser, ""),
		Workspace:      s.String(EnvWorkspace, ""),
		Deployment:     s.String(EnvDeployment, DefaultDeployment),
		ReadyTimeout:   s.Duration(EnvReadyTimeout, DefaultReadyTimeout, 5*time.Second),
	}
	minutes := func(name string, lo int) *int {
		if s.String(name, "") == "" {
			return nil
		}
		n := s.Int(name, 0, lo, 525_600)
		return &n
	}
	c.AutoStop = minutes(EnvAutoStop, 0)
	c.AutoArchive = minutes(EnvAutoArchive, 0)
	c.AutoDelete = minutes(EnvAutoDelete, -1)
	err := s.Err()
	var extra []error
	if c.Workspace != "" && (!path.IsAbs(c.Workspace) || path.Clean(c.Workspace) == "/") {
		extra = append(extra, fmt.Errorf("%s=%q: must be an absolute directory other than /, such as /home/daytona/workspace", EnvWorkspace, c.Workspace))
	}
	if !deploymentPattern.MatchString(c.Deployment) {
		extra = append(extra, fmt.Errorf("%s=%q: must be letters, digits, '.', '_' or '-' (at most 63)", EnvDeployment, c.Deployment))
	}
	if err != nil || len(extra) > 0 {
		all := append([]error{err}, extra...)
		return Config{}, errors.Join(all...)
	}
	return c, nil
}

// Check validates the variables without building a provider (app's Config.Validate).
func Check(env map[string]string) error {
	_, err := ConfigFrom(env)
	return err
}

func (c Config) withDefaults() Config {
	if c.APIURL == nil {
		c.APIURL, _ = url.Parse(DefaultAPIURL)
	}
	c.Deployment = cmp.Or(c.Deployment, DefaultDeployment)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.PollInterval = cmp.Or(c.PollInterval, 500*time.Millisecond)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxOutput = cmp.Or(c.MaxOutput, DefaultMaxOutput)
	if c.Workspace != "" {
		c.Workspace = path.Clean(c.Workspace)
	}
	return c
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
