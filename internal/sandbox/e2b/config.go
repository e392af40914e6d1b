package e2b

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
)

// The provider names (MANAGED_AGENT_SANDBOX values) this package serves: one client, two
// services that speak the same API.
const (
	NameE2B  = "e2b"
	NameCube = "cubesandbox"
)

// Defaults of Config.
const (
	DefaultE2BAPIURL   = "https://api.e2b.app"
	DefaultE2BDomain   = "e2b.app"
	DefaultE2BTemplate = "base"
	DefaultCubeDomain  = "cube.app"
	DefaultUser        = "user"
	DefaultWorkspace   = "/home/user"
	DefaultDeployment  = "default"
	// DefaultTimeout is the sandbox's time to live, renewed while it is used: what E2B does
	// when it runs out (pause or kill) is AutoPause's.
	DefaultTimeout      = 15 * time.Minute
	DefaultReadyTimeout = 2 * time.Minute
	// EnvdPort is the port of envd in every sandbox.
	EnvdPort = 49983
	// DefaultExecTimeout and DefaultMaxOutput apply to commands whose request leaves them
	// zero, as on the other providers.
	DefaultExecTimeout = 120 * time.Second
	DefaultMaxOutput   = 1 << 20
)

// Config configures a Provider.
type Config struct {
	// Name is NameE2B or NameCube: the provider name stored in every Ref.
	Name string
	// APIURL is the control plane (MANAGED_AGENT_<P>_API_URL).
	APIURL *url.URL
	// APIKey authenticates to the control plane (MANAGED_AGENT_<P>_API_KEY): as X-API-Key
	// for E2B, as a Bearer token for CubeSandbox. Empty sends none (a CubeAPI without auth).
	APIKey string
	// Bearer sends APIKey as `Authorization: Bearer` instead of X-API-Key.
	Bearer bool
	// Template is the template sandboxes start from when the environment names no image.
	Template string
	// Domain is the sandbox domain: envd is reached at <port>-<id>.<domain> unless the
	// control plane names another domain for the sandbox, or ProxyURL is set.
	Domain string
	// Scheme is the data plane's scheme, https unless the service serves plain http.
	Scheme string
	// ProxyURL, when set, is one data-plane base URL that routes by the E2b-Sandbox-Id and
	// E2b-Sandbox-Port headers (E2B's client-proxy).
	ProxyURL *url.URL
	// Timeout is the sandbox's time to live, renewed while it is used.
	Timeout time.Duration
	// AutoPause pauses a sandbox whose time ran out instead of killing it (Attach resumes it).
	AutoPause bool
	// User runs commands and owns the files written (envd's Basic-auth user).
	User string
	// Workspace is the absolute workspace directory in the sandbox; it must exist in the
	// template.
	Workspace string
	// Deployment is written into every sandbox's metadata: List and adoption see only this
	// deployment's sandboxes.
	Deployment string
	// ReadyTimeout bounds how long Create waits for envd to answer.
	ReadyTimeout time.Duration
	// CredentialVar names the API key's variable in messages about refused credentials.
	CredentialVar string

	// Transport is the HTTP transport (nil: a fresh one that ignores HTTP_PROXY).
	Transport http.RoundTripper
	// Retry bounds the retries of the control plane and of idempotent data-plane calls.
	Retry  remote.Retry
	Logger *slog.Logger
}

// Variables of each flavour.
func vars(prefix string) []string {
	names := []string{"API_URL", "API_KEY", "TEMPLATE", "DOMAIN", "SANDBOX_SCHEME", "SANDBOX_PROXY_URL",
		"TIMEOUT", "AUTO_PAUSE", "USER", "WORKSPACE", "DEPLOYMENT", "READY_TIMEOUT"}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

const (
	e2bPrefix  = "MANAGED_AGENT_E2B_"
	cubePrefix = "MANAGED_AGENT_CUBESANDBOX_"
)

// Settings are the variables the e2b provider reads; CubeSettings those of cubesandbox.
var (
	Settings     = vars(e2bPrefix)
	CubeSettings = vars(cubePrefix)
)

var (
	userPattern     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	domainPattern   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$`)
	templatePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./:-]{0,127}$`)
)

// ConfigFrom reads the e2b provider's variables (MANAGED_AGENT_E2B_*), every problem named.
func ConfigFrom(env map[string]string) (Config, error) { return configFrom(NameE2B, env) }

// CubeConfigFrom reads the cubesandbox provider's variables (MANAGED_AGENT_CUBESANDBOX_*):
// the API URL and template are required (a self-hosted CubeAPI has no public default), the
// key is optional (CubeAPI enforces auth only when configured) and is sent as a Bearer token.
func CubeConfigFrom(env map[string]string) (Config, error) { return configFrom(NameCube, env) }

func configFrom(name string, env map[string]string) (Config, error) {
	s := remote.NewSettings(env)
	c := Config{Name: name}
	p := e2bPrefix
	if name == NameCube {
		p = cubePrefix
		c.Bearer = true
		c.APIURL = s.URL(p+"API_URL", "")
		if c.APIURL == nil && s.String(p+"API_URL", "") == "" {
			s.Required(p+"API_URL", "the CubeAPI address, such as http://cube-api:3000")
		}
		c.APIKey = s.String(p+"API_KEY", "")
		c.Template = s.Required(p+"TEMPLATE", "the CubeSandbox template sandboxes start from")
		c.Domain = s.String(p+"DOMAIN", DefaultCubeDomain)
		c.AutoPause = s.Bool(p+"AUTO_PAUSE", false)
	} else {
		c.APIURL = s.URL(p+"API_URL", DefaultE2BAPIURL)
		c.APIKey = s.Required(p+"API_KEY", "the E2B API key (X-API-Key)")
		c.Template = s.String(p+"TEMPLATE", DefaultE2BTemplate)
		c.Domain = s.String(p+"DOMAIN", DefaultE2BDomain)
		c.AutoPause = s.Bool(p+"AUTO_PAUSE", true)
	}
	c.CredentialVar = p + "API_KEY"
	c.Scheme = strings.ToLower(s.String(p+"SANDBOX_SCHEME", "https"))
	c.ProxyURL = s.URL(p+"SANDBOX_PROXY_URL", "")
	c.Timeout = s.Duration(p+"TIMEOUT", DefaultTimeout, time.Minute)
	c.User = s.String(p+"USER", DefaultUser)
	c.Workspace = s.String(p+"WORKSPACE", DefaultWorkspace)
	c.Deployment = s.String(p+"DEPLOYMENT", DefaultDeployment)
	c.ReadyTimeout = s.Duration(p+"READY_TIMEOUT", DefaultReadyTimeout, time.Second)
	err := s.Err()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if c.Template != "" && !templatePattern.MatchString(c.Template) {
		errs = append(errs, fmt.Errorf("%sTEMPLATE=%q: must be a template id or alias", p, c.Template))
	}
	if !domainPattern.MatchString(c.Domain) {
		errs = append(errs, fmt.Errorf("%sDOMAIN=%q: must be a domain such as %s", p, c.Domain, DefaultE2BDomain))
	}
	if c.Scheme != "http" && c.Scheme != "https" {
		errs = append(errs, fmt.Errorf("%sSANDBOX_SCHEME=%q: must be https or http", p, c.Scheme))
	}
	if !userPattern.MatchString(c.User) {
		errs = append(errs, fmt.Errorf("%sUSER=%q: must be a user name of the template, such as %s", p, c.User, DefaultUser))
	}
	if !path.IsAbs(c.Workspace) || path.Clean(c.Workspace) != c.Workspace || c.Workspace == "/" {
		errs = append(errs, fmt.Errorf("%sWORKSPACE=%q: must be a clean absolute directory other than /, such as %s", p, c.Workspace, DefaultWorkspace))
	}
	if c.Deployment == "" || len(c.Deployment) > 63 || strings.ContainsAny(c.Deployment, "=&") {
		errs = append(errs, fmt.Errorf("%sDEPLOYMENT=%q: must be a short name without = or &", p, c.Deployment))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Check validates the e2b variables without reaching the service (app's Validate).
func Check(env map[string]string) error { _, err := ConfigFrom(env); return err }

// CubeCheck validates the cubesandbox variables.
func CubeCheck(env map[string]string) error { _, err := CubeConfigFrom(env); return err }
