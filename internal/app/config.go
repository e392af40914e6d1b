// Package app reads and validates the configuration and wires each role of the binary (serve,
// worker, dev, migrate) from the other packages. It is the only package that knows every
// other one; main only parses flags and calls a Run function of this package.
package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/metrics"
	"github.com/managed-agents/managed-agents/internal/sandbox/disks"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
	"github.com/managed-agents/managed-agents/internal/sandboxtoken"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

// Config is the process configuration. Every field has a MANAGED_AGENT_* variable; flags
// override variables. Validate checks it before a role starts anything.
type Config struct {
	// ModelRetry is how workflows retry transient model failures; zero means
	// durable.DefaultModelRetry. Not an environment variable: tests shorten it.
	ModelRetry durable.ModelRetry
	// KeyCacheTTL is how long the API trusts an accepted key without asking the database: the
	// bound on a revocation whose NOTIFY was lost, for new requests and open streams alike;
	// zero means a minute (sessions.WithKeyCacheTTL). Not an environment variable: tests
	// shorten it.
	KeyCacheTTL time.Duration
	// DatabaseURL is the PostgreSQL connection string (MANAGED_AGENT_DATABASE_URL).
	DatabaseURL string
	// Addr is the HTTP listen address (MANAGED_AGENT_ADDR).
	Addr string
	// APIKey, if set, is accepted and bound to a workspace at start (MANAGED_AGENT_API_KEY).
	APIKey string
	// AdminKey, if set, authorises the admin API (/v1/admin/…) on serve and dev
	// (MANAGED_AGENT_ADMIN_KEY); keys created with the admin flag do too.
	AdminKey string
	// VaultKeys is the keyring that encrypts vault credential secrets
	// (MANAGED_AGENT_VAULT_KEYS): comma-separated id:base64key entries, each key 32 bytes;
	// the first encrypts, all decrypt (docs/vaults.md). Empty: serve refuses to store
	// credentials; dev generates one into its data dir.
	VaultKeys string
	// LogLevel is debug, info, warn or error (MANAGED_AGENT_LOG_LEVEL).
	LogLevel string
	// LogFormat is json or text (MANAGED_AGENT_LOG_FORMAT).
	LogFormat string
	// DataDir is where dev keeps its private PostgreSQL and generated key (MANAGED_AGENT_DATA_DIR).
	DataDir string

	// TemporalAddress is host:port of Temporal (MANAGED_AGENT_TEMPORAL_ADDRESS); dev starts a
	// dev server when it is empty.
	TemporalAddress string
	// TemporalNamespace (MANAGED_AGENT_TEMPORAL_NAMESPACE), default "default".
	TemporalNamespace string
	// TemporalTLS (MANAGED_AGENT_TEMPORAL_TLS, a boolean) and TemporalAPIKey
	// (MANAGED_AGENT_TEMPORAL_API_KEY).
	TemporalTLS    bool
	TemporalAPIKey string
	// TemporalCompression is the gRPC compression to Temporal (MANAGED_AGENT_TEMPORAL_COMPRESSION):
	// gzip, none, or empty for gzip unless the address is a loopback one.
	TemporalCompression string
	// TaskQueue of session workflows (MANAGED_AGENT_TEMPORAL_TASK_QUEUE), default
	// managed-agents-sessions. API and workers of one deployment must agree.
	TaskQueue string

	// Model is fake or anthropic (MANAGED_AGENT_MODEL).
	Model string
	// ModelCatalog is a JSON file of models laid over the built-in catalog of limits and
	// list prices (MANAGED_AGENT_MODEL_CATALOG; docs/costs.md).
	ModelCatalog string
	// ModelMaxTokens caps max_tokens of model requests (MANAGED_AGENT_MODEL_MAX_TOKENS); 0, the
	// default, sends each model's own output limit from the catalog (docs/real-model.md).
	ModelMaxTokens int
	// FakeWordDelay paces the fake model's streamed words so previews are visible
	// (MANAGED_AGENT_FAKE_MODEL_WORD_DELAY, e.g. 20ms; default none).
	FakeWordDelay time.Duration
	// AnthropicBaseURL, AnthropicAPIKey, AnthropicAuthToken configure the anthropic model
	// (MANAGED_AGENT_ANTHROPIC_BASE_URL, _API_KEY, _AUTH_TOKEN).
	AnthropicBaseURL   string
	AnthropicAPIKey    string
	AnthropicAuthToken string
	// ModelProvider says where MANAGED_AGENT_MODEL=anthropic calls Claude: the Anthropic API or
	// a gateway, Amazon Bedrock, Google Vertex AI or Microsoft Foundry (modelprovider.go).
	ModelProvider ModelProviderConfig

	// Sandbox is the sandbox provider, one of sandboxProviders (MANAGED_AGENT_SANDBOX).
	Sandbox string
	// SandboxDir is where the local provider puts work directories (MANAGED_AGENT_SANDBOX_DIR).
	SandboxDir string
	// Docker* configure the docker provider: the image (MANAGED_AGENT_DOCKER_IMAGE), the
	// limits of a sandbox (MANAGED_AGENT_DOCKER_CPUS, a count such as 1 or 0.5;
	// MANAGED_AGENT_DOCKER_MEMORY, bytes such as 1g or 512m; MANAGED_AGENT_DOCKER_PIDS), the OCI
	// runtime (MANAGED_AGENT_DOCKER_RUNTIME, e.g. runsc) and the deployment label value
	// (MANAGED_AGENT_DOCKER_DEPLOYMENT). Empty values are the provider's defaults; dockerConfig
	// parses them.
	DockerImage, DockerCPUs, DockerMemory, DockerPids, DockerRuntime, DockerDeployment string
	// Kubernetes* configure the kubernetes provider (kubernetesConfig, docs/kubernetes.md):
	// MANAGED_AGENT_KUBERNETES_NAMESPACE, _IMAGE, _SANDBOXD_PORT, _RUNTIME_CLASS,
	// _SERVICE_ACCOUNT, _READY_TIMEOUT and _PACKAGE_TIMEOUT; the cluster is KUBECONFIG's, else in-cluster.
	KubernetesNamespace, KubernetesImage, KubernetesSandboxdPort, KubernetesRuntimeClass, KubernetesServiceAccount, KubernetesReadyTimeout, KubernetesPackageTimeout string
	// ProviderSettings holds the variables the remote sandbox providers declare
	// (MANAGED_AGENT_E2B_*, MANAGED_AGENT_OPENSANDBOX_*, …: each row of sandboxProviders lists
	// its own), read as set; each provider parses and validates its own.
	ProviderSettings map[string]string
	// KubernetesProvider is what new SandboxBindings name (MANAGED_AGENT_KUBERNETES_PROVIDER):
	// pod (default) or a remote provider the controller creates the sandbox at.
	KubernetesProvider string
	// ControllerSandboxProviders lists the remote providers the controller provisions
	// SandboxBindings at (MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS, comma separated).
	ControllerSandboxProviders string
	// KubernetesPersistentWorkspace gives sandbox pods a PersistentVolumeClaim for /workspace,
	// which the idle stop suspends them with (MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE), of
	// MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS; MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE
	// is the workspace size of environments that name none.
	KubernetesPersistentWorkspace                            bool
	KubernetesWorkspaceStorageClass, KubernetesWorkspaceSize string
	// Sandbox pods, on the controller's side (sandboxPodsConfig): the image sandboxd is copied
	// from (MANAGED_AGENT_SANDBOXD_IMAGE), the worker pods that may call it
	// (MANAGED_AGENT_SANDBOX_WORKER_SELECTOR, _WORKER_NAMESPACE) and the egress proxy pods
	// allowlisted sandboxes may reach (MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR, _NAMESPACE, _PORT)
	// and where they reach them (_HOST: the proxy Service's name or an IP); with the proxy's
	// key (MANAGED_AGENT_EGRESS_PROXY_KEY or _FILE) the controller signs their credentials.
	SandboxdImage, SandboxWorkerSelector, SandboxWorkerNamespace, SandboxEgressProxySelector, SandboxEgressProxyNamespace, SandboxEgressProxyPort, SandboxEgressProxyHost string
	// KubernetesDefaultCPU and KubernetesDefaultMemory are the CPU and memory (requests and
	// limits) of sandbox pods whose environment names none, on the controller's side
	// (MANAGED_AGENT_KUBERNETES_DEFAULT_CPU, _MEMORY; empty: those of a docker sandbox).
	KubernetesDefaultCPU, KubernetesDefaultMemory string
	// SandboxNamespace is the only namespace whose SandboxBindings the controller serves
	// (MANAGED_AGENT_SANDBOX_NAMESPACE; empty: every namespace).
	SandboxNamespace string
	// SandboxSubstrate is what the controller makes sandbox pods through: pods (the default)
	// or agent-sandbox, kubernetes-sigs/agent-sandbox's Sandbox, SandboxClaim and
	// SandboxWarmPool (MANAGED_AGENT_SANDBOX_SUBSTRATE).
	SandboxSubstrate string
	// DockerRunner is the managed-agents binary docker sandboxes run to serve commands and
	// files (MANAGED_AGENT_DOCKER_RUNNER; default this executable): a static Linux build.
	DockerRunner string
	// DockerWarmPool (MANAGED_AGENT_DOCKER_WARM_POOL, a count, default 0) and
	// DockerPackageTimeout (MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT, a duration): see
	// dockerPoolConfig.
	DockerWarmPool, DockerPackageTimeout string
	// DockerDisk bounds each docker sandbox's workspace (MANAGED_AGENT_DOCKER_DISK, a size
	// such as 10g, the default; 0 leaves workspaces unbounded) with a filesystem of that size
	// under DockerDiskDir (MANAGED_AGENT_DOCKER_DISK_DIR, default /var/lib/managed-agents/disks).
	DockerDisk, DockerDiskDir string
	// SandboxIdleStop stops a sandbox (workspace kept, started again on the next acquisition)
	// whose session has not used it for that long (MANAGED_AGENT_SANDBOX_IDLE_STOP, a
	// duration; zero, the default, never stops one). SandboxRetention destroys one idle that
	// long, after which the session's next tool call fails (MANAGED_AGENT_SANDBOX_RETENTION;
	// zero, the default, keeps it forever; the hosted service keeps sandbox state 30 days).
	SandboxIdleStop, SandboxRetention time.Duration
	// ServerURL, EnvironmentID and EnvironmentKey are what environment-worker serves: the
	// base URL of the server, one of its self-hosted environments and that environment's key
	// (MANAGED_AGENT_SERVER_URL, MANAGED_AGENT_ENVIRONMENT_ID, MANAGED_AGENT_ENVIRONMENT_KEY).
	ServerURL, EnvironmentID, EnvironmentKey string
	// EnvironmentWorkerConcurrency is how many sessions environment-worker serves at once
	// (MANAGED_AGENT_ENVIRONMENT_WORKER_CONCURRENCY, default 4).
	EnvironmentWorkerConcurrency int
	// EnvironmentWorkerMaxIdle is how long environment-worker keeps serving a session after its
	// turn ended before it stops the session's work item
	// (MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE, default 60s, the SDK's).
	EnvironmentWorkerMaxIdle time.Duration
	// WorkLeaseTTL is a self-hosted work item's lease when its worker asks for none: a worker
	// that stops heartbeating loses its item this long after its last heartbeat
	// (MANAGED_AGENT_WORK_LEASE_TTL, default 60s; docs/self-hosted-environments.md).
	WorkLeaseTTL time.Duration
	// SelfHostedToolTimeout bounds how long a built-in call of a self-hosted session waits for
	// a worker's result before the turn ends with session.error
	// (MANAGED_AGENT_SELF_HOSTED_TOOL_TIMEOUT, default 10m).
	SelfHostedToolTimeout time.Duration
	// Network is the sandbox networking: the ceiling, the docker topology, the egress proxy
	// (network.go).
	Network NetworkConfig
	// Web configures the server-side web tools web_fetch and web_search (web.go).
	Web WebConfig
	// AllowUnsafeLocalSandbox lets a real model drive the local sandbox
	// (MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX, a boolean).
	AllowUnsafeLocalSandbox bool

	// ConversationCache is how much of its sessions' logs a worker keeps so that a model
	// request reads only what is new (MANAGED_AGENT_CONVERSATION_CACHE, a size; default 64m,
	// 0 keeps none).
	ConversationCache string
	// WorkerStopTimeout is how long a stopping worker (SIGTERM, Ctrl-C) lets running steps
	// finish before it cuts them (MANAGED_AGENT_WORKER_STOP_TIMEOUT, a duration; default
	// durable.DefaultStopTimeout).
	WorkerStopTimeout time.Duration
	// StartupTimeout is how long serve, worker and controller wait at start for PostgreSQL,
	// the migrations and Temporal before they give up (MANAGED_AGENT_STARTUP_TIMEOUT, a
	// duration; zero: DefaultStartupTimeout).
	StartupTimeout time.Duration
	// LogOutput is where the roles log; nil means standard error. Tests read their role's log.
	LogOutput io.Writer

	// MCP bounds the worker's connections to MCP servers (mcp.go).
	MCP MCPConfig

	// Tracing is OpenTelemetry tracing, off by default (tracing.go).
	Tracing TracingConfig
	// RateLimits are the per-key rate limits and per-workspace quotas (ratelimits.go).
	RateLimits RateLimitConfig

	// Kubeconfig is the kubeconfig the controller uses (KUBECONFIG, a list of files as kubectl
	// reads it, or --kubeconfig); empty means in-cluster for `controller`, and no controller at
	// all for `dev`.
	Kubeconfig string
	// ControllerMetricsAddr is where the controller serves Prometheus metrics
	// (MANAGED_AGENT_CONTROLLER_METRICS_ADDR, host:port, or 0 for none).
	ControllerMetricsAddr string
	// MetricsAddr is where serve and worker serve Prometheus /metrics, and the controller
	// unless ControllerMetricsAddr is set (MANAGED_AGENT_METRICS_ADDR, host:port, default
	// :9090; off or 0 for none). dev answers /metrics on its API listener instead.
	MetricsAddr string
	// PprofAddr is where serve, worker and dev serve Go's profiles (/debug/pprof/), host:port;
	// empty or 0 for none (MANAGED_AGENT_PPROF_ADDR, default none).
	PprofAddr string
	// Metrics and MetricsRegistry are what the roles record with and where the database
	// pool's collector goes; nil records nothing. Not environment variables: the Run functions
	// make them (metrics.go), tests bring their own.
	Metrics         *metrics.Metrics
	MetricsRegistry prometheus.Registerer
	// ControllerHealthAddr serves /healthz and /readyz (MANAGED_AGENT_CONTROLLER_HEALTH_ADDR,
	// host:port, or 0 for none).
	ControllerHealthAddr string
	// ControllerLeaderElect makes controller replicas elect one active leader through a Lease
	// (MANAGED_AGENT_CONTROLLER_LEADER_ELECT, a boolean; on for `controller`, off in `dev`).
	ControllerLeaderElect bool
	// ControllerLeaderElectionNamespace holds the Lease (MANAGED_AGENT_CONTROLLER_LEADER_ELECTION_NAMESPACE);
	// in a pod it defaults to the pod's namespace, outside one it is required with leader election.
	ControllerLeaderElectionNamespace string
	// ControllerWorkspaces maps namespaces to workspace ids (MANAGED_AGENT_CONTROLLER_WORKSPACES,
	// "ns=wrk_...,other=wrk_...").
	ControllerWorkspaces string
	// ControllerWorkspacePerNamespace gives every other namespace a workspace of its own,
	// created on first use (MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE, a boolean,
	// default on); off, resources in unmapped namespaces are not served.
	ControllerWorkspacePerNamespace bool

	// Sandboxd* configure `sandboxd`, the daemon inside a sandbox pod: its listen address
	// (MANAGED_AGENT_SANDBOXD_ADDR, host:port, default :8090), the workspace it serves
	// (MANAGED_AGENT_SANDBOXD_WORKSPACE, default /workspace) and its per-sandbox token
	// (MANAGED_AGENT_SANDBOXD_TOKEN, or a file holding it: MANAGED_AGENT_SANDBOXD_TOKEN_FILE).
	SandboxdAddr, SandboxdWorkspace, SandboxdToken, SandboxdTokenFile string
	// SandboxdTokenSubject (MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT), when set, makes the token
	// variable or file a key, and sandboxd's token the one derived from it for this subject
	// (package sandboxtoken): an agent-sandbox warm pool's pods share the key and each
	// derives its own token from its pod's UID.
	SandboxdTokenSubject string
	// SandboxdPackagesDir (MANAGED_AGENT_SANDBOXD_PACKAGES_DIR, optional, absolute) is where
	// an environment's packages are installed as the sandbox's user (a sandbox pod's
	// emptyDir): commands get the variables that send installers there and find what they
	// installed (packages.UserEnv).
	SandboxdPackagesDir string

	// unparsed holds, by variable, the messages for values FromEnv could not parse (a
	// duration, a boolean); Validate reports them in its order.
	unparsed map[string]string
}

// minAdminKeyLen keeps the admin key out of guessing range.
const minAdminKeyLen = 24

// Validate checks every value, in a fixed order (model, sandbox, durations, logging,
// addresses, Temporal, then the guard that needs a valid model and sandbox), and reports every
// problem it finds, each naming its variable and the allowed values. A role calls it before
// it initialises, starts or writes anything.
func (c Config) Validate() error {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	modelErr := c.validateModel()
	sandboxErr := c.validateSandbox()
	check(modelErr)
	check(sandboxErr)
	_, err := c.dockerConfig()
	check(err)
	if c.Sandbox == kubernetes.Name {
		_, err = c.kubernetesConfig()
		check(err)
	}
	_, err = c.sandboxPodsConfig()
	check(err)
	_, err = c.remoteProviders("MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS", c.ControllerSandboxProviders, false)
	check(err)
	if p, ok := c.lookupSandbox(); ok && p.check != nil {
		check(p.check(c.ProviderSettings))
	}
	check(c.parsed("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY"))
	if c.FakeWordDelay < 0 {
		check(fmt.Errorf("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY=%s: must not be negative", c.FakeWordDelay))
	}
	check(c.validateIdle())
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"MANAGED_AGENT_WORK_LEASE_TTL", c.WorkLeaseTTL}, {"MANAGED_AGENT_SELF_HOSTED_TOOL_TIMEOUT", c.SelfHostedToolTimeout},
		{"MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE", c.EnvironmentWorkerMaxIdle}} {
		check(c.parsed(v.name))
		if v.d != 0 && v.d < time.Second { // zero (a Config built in code) is the default
			check(fmt.Errorf("%s=%s: must be at least 1s", v.name, v.d))
		}
	}
	check(c.validateMCP())
	_, err = c.modelCatalog()
	check(err)
	if err := c.parsed("MANAGED_AGENT_MODEL_MAX_TOKENS"); err != nil {
		check(err)
	} else if c.ModelMaxTokens < 0 || (c.ModelMaxTokens > 0 && c.ModelMaxTokens < minModelMaxTokens) {
		check(fmt.Errorf("MANAGED_AGENT_MODEL_MAX_TOKENS=%d: must be 0 (each model's own output limit) or at least %d", c.ModelMaxTokens, minModelMaxTokens))
	}
	_, err = c.conversationCacheBytes()
	check(err)
	if c.AdminKey != "" && c.AdminKey == c.APIKey {
		check(errors.New("MANAGED_AGENT_ADMIN_KEY equals MANAGED_AGENT_API_KEY: the admin key must be a secret of its own"))
	}
	if c.AdminKey != "" && len(c.AdminKey) < minAdminKeyLen {
		check(fmt.Errorf("MANAGED_AGENT_ADMIN_KEY: at least %d characters (it can create keys for every workspace; `openssl rand -hex 32` makes one)", minAdminKeyLen))
	}
	check(c.Network.validate())
	check(c.validateWeb())
	check(c.Tracing.validate())
	check(c.validateRateLimits())
	check(c.parsed("MANAGED_AGENT_WORKER_STOP_TIMEOUT"))
	if c.WorkerStopTimeout < 0 {
		check(fmt.Errorf("MANAGED_AGENT_WORKER_STOP_TIMEOUT=%s: must not be negative", c.WorkerStopTimeout))
	}
	check(c.parsed("MANAGED_AGENT_STARTUP_TIMEOUT"))
	if c.StartupTimeout < 0 {
		check(fmt.Errorf("MANAGED_AGENT_STARTUP_TIMEOUT=%s: must not be negative", c.StartupTimeout))
	}
	_, err = c.logLevel()
	check(err)
	_, err = c.logFormat()
	check(err)
	check(validateHostPort("MANAGED_AGENT_ADDR", c.Addr))
	_, err = c.vaultKeys()
	check(err)
	if c.DatabaseURL != "" {
		if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
			// pgconn's message may quote the URL, password included.
			check(errors.New("MANAGED_AGENT_DATABASE_URL: must be a PostgreSQL connection string (postgres://user:password@host:5432/db?sslmode=disable)"))
		}
	}
	check(validateHostPort("MANAGED_AGENT_TEMPORAL_ADDRESS", c.TemporalAddress))
	check(validateHostPort("MANAGED_AGENT_SANDBOXD_ADDR", c.SandboxdAddr))
	check(c.parsed("MANAGED_AGENT_TEMPORAL_TLS"))
	if !slices.Contains([]string{"", "gzip", "none"}, c.TemporalCompression) {
		check(fmt.Errorf("MANAGED_AGENT_TEMPORAL_COMPRESSION=%q: must be gzip or none (unset: gzip unless the address is a loopback one)", c.TemporalCompression))
	}
	check(c.parsed("MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX"))
	check(validateAddrOrOff("MANAGED_AGENT_CONTROLLER_METRICS_ADDR", c.ControllerMetricsAddr))
	check(validateAddrOrOff("MANAGED_AGENT_CONTROLLER_HEALTH_ADDR", c.ControllerHealthAddr))
	check(validateMetricsAddr(c.MetricsAddr))
	check(validateAddrOrOff("MANAGED_AGENT_PPROF_ADDR", c.PprofAddr))
	check(c.parsed("MANAGED_AGENT_CONTROLLER_LEADER_ELECT"))
	check(c.parsed("MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE"))
	_, err = c.controllerWorkspaces()
	check(err)
	// The guard reasons about a model and a sandbox; with either invalid, its message would
	// hide the real mistake.
	if modelErr == nil && sandboxErr == nil {
		check(CheckSandboxGuard(c))
	}
	return errors.Join(errs...)
}

// vaultKeys parses MANAGED_AGENT_VAULT_KEYS; nil when unset. Messages never quote a key.
func (c Config) vaultKeys() (*secretbox.Keyring, error) {
	if strings.TrimSpace(c.VaultKeys) == "" {
		return nil, nil
	}
	kr, err := secretbox.Parse(c.VaultKeys)
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_VAULT_KEYS: %v (must be comma-separated id:base64key entries, each key 32 bytes, e.g. k1:$(openssl rand -base64 32); the first key encrypts)", err)
	}
	return kr, nil
}

func (c Config) parsed(name string) error {
	if msg, ok := c.unparsed[name]; ok {
		return errors.New(msg)
	}
	return nil
}

func (c Config) validateModel() error {
	switch c.Model {
	case "", "fake":
		return c.validateProviderName()
	case "anthropic":
		return c.validateClaude() // modelprovider.go: the variables of the provider it names
	}
	return fmt.Errorf("MANAGED_AGENT_MODEL=%q: must be fake or anthropic", c.Model)
}

func (c Config) validateSandbox() error {
	if _, ok := c.lookupSandbox(); ok {
		return nil
	}
	names := make([]string, len(sandboxProviders))
	for i, p := range sandboxProviders {
		names[i] = p.name
	}
	return fmt.Errorf("MANAGED_AGENT_SANDBOX=%q: must be one of %s", c.Sandbox, strings.Join(names, ", "))
}

// minIdle is the shortest idle clock: the sweep runs about once a minute, so a shorter one
// would only promise what it cannot keep.
const minIdle = time.Minute

func (c Config) validateIdle() error {
	var errs []error
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"MANAGED_AGENT_SANDBOX_IDLE_STOP", c.SandboxIdleStop}, {"MANAGED_AGENT_SANDBOX_RETENTION", c.SandboxRetention}} {
		if err := c.parsed(v.name); err != nil {
			errs = append(errs, err)
			continue
		}
		if v.d != 0 && v.d < minIdle {
			errs = append(errs, fmt.Errorf("%s=%s: must be 0 (off) or at least %s", v.name, v.d, minIdle))
		}
	}
	if len(errs) == 0 && c.SandboxIdleStop > 0 && c.SandboxRetention > 0 && c.SandboxRetention <= c.SandboxIdleStop {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_RETENTION=%s: must be longer than MANAGED_AGENT_SANDBOX_IDLE_STOP=%s (or 0)", c.SandboxRetention, c.SandboxIdleStop))
	}
	return errors.Join(errs...)
}

// sandboxdToken is the token `sandboxd` requires: from the variable or the file (one of
// them), at least sandboxd.MinTokenBytes long.
func (c Config) sandboxdToken() (string, error) {
	token, err := secretOrFile("MANAGED_AGENT_SANDBOXD_TOKEN", c.SandboxdToken, c.SandboxdTokenFile, "token", sandboxd.MinTokenBytes)
	if err == nil && token == "" {
		err = errors.New("MANAGED_AGENT_SANDBOXD_TOKEN or MANAGED_AGENT_SANDBOXD_TOKEN_FILE is required: the sandbox's token every call must carry (e.g. openssl rand -hex 32)")
	}
	if err == nil && c.SandboxdTokenSubject != "" {
		token = sandboxtoken.Derive(token, c.SandboxdTokenSubject)
	}
	return token, err
}

// secretOrFile is a credential given as the variable name or as a file named by name_FILE
// (one of them; one trailing newline of the file dropped), at least minBytes long; "" when
// neither is set. Messages name the variables and never the value.
func secretOrFile(name, value, file, noun string, minBytes int) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("%s and %s_FILE: set one of them, not both", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s_FILE=%q: %w", name, file, err)
		}
		value = strings.TrimRight(string(b), "\r\n")
		if len(value) < minBytes {
			return "", fmt.Errorf("%s_FILE=%q: the %s must have at least %d bytes (e.g. openssl rand -hex 32)", name, file, noun, minBytes)
		}
	case value != "" && len(value) < minBytes:
		return "", fmt.Errorf("%s: the %s must have at least %d bytes (e.g. openssl rand -hex 32)", name, noun, minBytes)
	}
	return value, nil
}

// sandboxdWorkspace is the directory `sandboxd` serves: absolute and an existing directory.
func (c Config) sandboxdWorkspace() (string, error) {
	dir := orDefault(c.SandboxdWorkspace, DefaultSandboxdWorkspace)
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("MANAGED_AGENT_SANDBOXD_WORKSPACE=%q: must be an absolute path such as /workspace", dir)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("MANAGED_AGENT_SANDBOXD_WORKSPACE=%q: %w", dir, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("MANAGED_AGENT_SANDBOXD_WORKSPACE=%q: not a directory", dir)
	}
	return dir, nil
}

// sandboxdPackagesDir is where `sandboxd`'s commands install packages: "" (none), or an
// absolute path of an existing directory.
func (c Config) sandboxdPackagesDir() (string, error) {
	dir := c.SandboxdPackagesDir
	if dir == "" {
		return "", nil
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("MANAGED_AGENT_SANDBOXD_PACKAGES_DIR=%q: must be an absolute path such as /opt/ma-packages", dir)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("MANAGED_AGENT_SANDBOXD_PACKAGES_DIR=%q: not an existing directory", dir)
	}
	return dir, nil
}

// validateHostPort accepts an empty value (the role's default applies) or host:port.
func validateHostPort(name, v string) error {
	if v == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		return fmt.Errorf("%s=%q: must be host:port, such as 127.0.0.1:8080 or :8080", name, v)
	}
	return nil
}

// validateAddrOrOff accepts empty (the default), 0 (off) or host:port.
func validateAddrOrOff(name, v string) error {
	if v == "0" {
		return nil
	}
	if v == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		return fmt.Errorf("%s=%q: must be host:port, such as :8081, or 0 for none", name, v)
	}
	return nil
}

// namespaceName is a Kubernetes namespace name (an RFC 1123 label).
var namespaceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// controllerWorkspaces parses MANAGED_AGENT_CONTROLLER_WORKSPACES: namespace=workspace
// pairs separated by commas.
func (c Config) controllerWorkspaces() (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(c.ControllerWorkspaces) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(c.ControllerWorkspaces, ",") {
		ns, ws, ok := strings.Cut(strings.TrimSpace(pair), "=")
		ns, ws = strings.TrimSpace(ns), strings.TrimSpace(ws)
		if !ok || !namespaceName.MatchString(ns) || ws == "" {
			return nil, fmt.Errorf("MANAGED_AGENT_CONTROLLER_WORKSPACES: %q must be namespace=workspace_id pairs separated by commas, such as default=wrkspc_0123", pair)
		}
		if _, dup := out[ns]; dup {
			return nil, fmt.Errorf("MANAGED_AGENT_CONTROLLER_WORKSPACES: namespace %s is mapped twice", ns)
		}
		out[ns] = ws
	}
	return out, nil
}

func (c Config) logLevel() (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(c.LogLevel, "info"))); err != nil {
		return 0, fmt.Errorf("MANAGED_AGENT_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	return level, nil
}

func (c Config) logFormat() (string, error) {
	f := strings.ToLower(orDefault(c.LogFormat, "json"))
	if f != "json" && f != "text" {
		return "", fmt.Errorf("MANAGED_AGENT_LOG_FORMAT=%q: must be json or text", c.LogFormat)
	}
	return f, nil
}

// FromEnv reads the variables over the given defaults. Values it cannot parse are kept for
// Validate to report.
func FromEnv(def Config) Config { return FromLookup(def, os.LookupEnv) }

// FromLookup is FromEnv with the variables read through lookup: main hands over credentials
// that it keeps out of the process environment.
func FromLookup(def Config, lookup func(string) (string, bool)) Config {
	c := def
	c.unparsed = map[string]string{}
	get := func(name string) string {
		v, _ := lookup(name)
		return v
	}
	set := func(dst *string, name string) {
		if v := get(name); v != "" {
			*dst = v
		}
	}
	set(&c.DatabaseURL, "MANAGED_AGENT_DATABASE_URL")
	set(&c.Addr, "MANAGED_AGENT_ADDR")
	set(&c.APIKey, "MANAGED_AGENT_API_KEY")
	set(&c.AdminKey, "MANAGED_AGENT_ADMIN_KEY")
	set(&c.ServerURL, "MANAGED_AGENT_SERVER_URL")
	set(&c.EnvironmentID, "MANAGED_AGENT_ENVIRONMENT_ID")
	set(&c.EnvironmentKey, "MANAGED_AGENT_ENVIRONMENT_KEY")
	c.envInt(&c.EnvironmentWorkerConcurrency, "MANAGED_AGENT_ENVIRONMENT_WORKER_CONCURRENCY", get("MANAGED_AGENT_ENVIRONMENT_WORKER_CONCURRENCY"))
	c.envDuration(&c.EnvironmentWorkerMaxIdle, "MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE", get("MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE"), "60s")
	set(&c.VaultKeys, "MANAGED_AGENT_VAULT_KEYS")
	set(&c.LogLevel, "MANAGED_AGENT_LOG_LEVEL")
	set(&c.LogFormat, "MANAGED_AGENT_LOG_FORMAT")
	set(&c.DataDir, "MANAGED_AGENT_DATA_DIR")
	set(&c.TemporalAddress, "MANAGED_AGENT_TEMPORAL_ADDRESS")
	set(&c.TemporalNamespace, "MANAGED_AGENT_TEMPORAL_NAMESPACE")
	set(&c.TemporalAPIKey, "MANAGED_AGENT_TEMPORAL_API_KEY")
	set(&c.TemporalCompression, "MANAGED_AGENT_TEMPORAL_COMPRESSION")
	set(&c.TaskQueue, "MANAGED_AGENT_TEMPORAL_TASK_QUEUE")
	set(&c.Model, "MANAGED_AGENT_MODEL")
	set(&c.ModelCatalog, "MANAGED_AGENT_MODEL_CATALOG")
	c.envInt(&c.ModelMaxTokens, "MANAGED_AGENT_MODEL_MAX_TOKENS", get("MANAGED_AGENT_MODEL_MAX_TOKENS"))
	set(&c.AnthropicBaseURL, "MANAGED_AGENT_ANTHROPIC_BASE_URL")
	set(&c.AnthropicAPIKey, "MANAGED_AGENT_ANTHROPIC_API_KEY")
	set(&c.AnthropicAuthToken, "MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN")
	c.ModelProvider = modelProviderFromLookup(c.ModelProvider, get)
	set(&c.Sandbox, "MANAGED_AGENT_SANDBOX")
	set(&c.SandboxDir, "MANAGED_AGENT_SANDBOX_DIR")
	set(&c.DockerImage, "MANAGED_AGENT_DOCKER_IMAGE")
	set(&c.DockerCPUs, "MANAGED_AGENT_DOCKER_CPUS")
	set(&c.DockerMemory, "MANAGED_AGENT_DOCKER_MEMORY")
	set(&c.DockerPids, "MANAGED_AGENT_DOCKER_PIDS")
	set(&c.DockerRuntime, "MANAGED_AGENT_DOCKER_RUNTIME")
	set(&c.DockerRunner, "MANAGED_AGENT_DOCKER_RUNNER")
	set(&c.DockerDeployment, "MANAGED_AGENT_DOCKER_DEPLOYMENT")
	set(&c.DockerWarmPool, "MANAGED_AGENT_DOCKER_WARM_POOL")
	set(&c.DockerDisk, "MANAGED_AGENT_DOCKER_DISK")
	set(&c.DockerDiskDir, "MANAGED_AGENT_DOCKER_DISK_DIR")
	set(&c.KubernetesNamespace, "MANAGED_AGENT_KUBERNETES_NAMESPACE")
	set(&c.KubernetesImage, "MANAGED_AGENT_KUBERNETES_IMAGE")
	set(&c.KubernetesSandboxdPort, "MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT")
	set(&c.KubernetesRuntimeClass, "MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS")
	set(&c.KubernetesServiceAccount, "MANAGED_AGENT_KUBERNETES_SERVICE_ACCOUNT")
	set(&c.KubernetesReadyTimeout, "MANAGED_AGENT_KUBERNETES_READY_TIMEOUT")
	set(&c.KubernetesPackageTimeout, "MANAGED_AGENT_KUBERNETES_PACKAGE_TIMEOUT")
	set(&c.KubernetesProvider, "MANAGED_AGENT_KUBERNETES_PROVIDER")
	set(&c.ControllerSandboxProviders, "MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS")
	set(&c.KubernetesWorkspaceStorageClass, "MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS")
	set(&c.KubernetesWorkspaceSize, "MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE")
	set(&c.SandboxdImage, "MANAGED_AGENT_SANDBOXD_IMAGE")
	set(&c.KubernetesDefaultCPU, "MANAGED_AGENT_KUBERNETES_DEFAULT_CPU")
	set(&c.KubernetesDefaultMemory, "MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY")
	set(&c.SandboxNamespace, "MANAGED_AGENT_SANDBOX_NAMESPACE")
	set(&c.SandboxSubstrate, "MANAGED_AGENT_SANDBOX_SUBSTRATE")
	set(&c.SandboxWorkerSelector, "MANAGED_AGENT_SANDBOX_WORKER_SELECTOR")
	set(&c.SandboxWorkerNamespace, "MANAGED_AGENT_SANDBOX_WORKER_NAMESPACE")
	set(&c.SandboxEgressProxySelector, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR")
	set(&c.SandboxEgressProxyNamespace, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_NAMESPACE")
	set(&c.SandboxEgressProxyPort, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_PORT")
	set(&c.SandboxEgressProxyHost, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST")
	set(&c.DockerPackageTimeout, "MANAGED_AGENT_DOCKER_PACKAGE_TIMEOUT")
	c.Network = networkFromLookup(c.Network, get)
	c.Web = webFromLookup(c.Web, get)
	c.Tracing = tracingFromLookup(c.Tracing, get)
	for _, p := range sandboxProviders {
		for _, name := range p.settings {
			if v := get(name); v != "" {
				if c.ProviderSettings == nil {
					c.ProviderSettings = map[string]string{}
				}
				c.ProviderSettings[name] = v
			}
		}
	}
	set(&c.SandboxdAddr, "MANAGED_AGENT_SANDBOXD_ADDR")
	set(&c.SandboxdWorkspace, "MANAGED_AGENT_SANDBOXD_WORKSPACE")
	set(&c.SandboxdToken, "MANAGED_AGENT_SANDBOXD_TOKEN")
	set(&c.SandboxdTokenFile, "MANAGED_AGENT_SANDBOXD_TOKEN_FILE")
	set(&c.SandboxdTokenSubject, "MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT")
	set(&c.SandboxdPackagesDir, "MANAGED_AGENT_SANDBOXD_PACKAGES_DIR")
	set(&c.Kubeconfig, "KUBECONFIG")
	set(&c.ControllerMetricsAddr, "MANAGED_AGENT_CONTROLLER_METRICS_ADDR")
	set(&c.ControllerHealthAddr, "MANAGED_AGENT_CONTROLLER_HEALTH_ADDR")
	set(&c.MetricsAddr, "MANAGED_AGENT_METRICS_ADDR")
	set(&c.PprofAddr, "MANAGED_AGENT_PPROF_ADDR")
	set(&c.ConversationCache, "MANAGED_AGENT_CONVERSATION_CACHE")
	set(&c.ControllerLeaderElectionNamespace, "MANAGED_AGENT_CONTROLLER_LEADER_ELECTION_NAMESPACE")
	set(&c.ControllerWorkspaces, "MANAGED_AGENT_CONTROLLER_WORKSPACES")
	c.envBool(&c.ControllerLeaderElect, "MANAGED_AGENT_CONTROLLER_LEADER_ELECT", get("MANAGED_AGENT_CONTROLLER_LEADER_ELECT"))
	c.envBool(&c.ControllerWorkspacePerNamespace, "MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE", get("MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE"))
	c.envDuration(&c.FakeWordDelay, "MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", get("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY"), "20ms")
	c.envDuration(&c.SandboxIdleStop, "MANAGED_AGENT_SANDBOX_IDLE_STOP", get("MANAGED_AGENT_SANDBOX_IDLE_STOP"), "30m")
	c.envDuration(&c.SandboxRetention, "MANAGED_AGENT_SANDBOX_RETENTION", get("MANAGED_AGENT_SANDBOX_RETENTION"), "720h")
	c.envDuration(&c.WorkLeaseTTL, "MANAGED_AGENT_WORK_LEASE_TTL", get("MANAGED_AGENT_WORK_LEASE_TTL"), "60s")
	c.envDuration(&c.SelfHostedToolTimeout, "MANAGED_AGENT_SELF_HOSTED_TOOL_TIMEOUT", get("MANAGED_AGENT_SELF_HOSTED_TOOL_TIMEOUT"), "10m")
	c.envDuration(&c.WorkerStopTimeout, "MANAGED_AGENT_WORKER_STOP_TIMEOUT", get("MANAGED_AGENT_WORKER_STOP_TIMEOUT"), "25s")
	c.envDuration(&c.StartupTimeout, "MANAGED_AGENT_STARTUP_TIMEOUT", get("MANAGED_AGENT_STARTUP_TIMEOUT"), "5m")
	c.envBool(&c.TemporalTLS, "MANAGED_AGENT_TEMPORAL_TLS", get("MANAGED_AGENT_TEMPORAL_TLS"))
	c.envBool(&c.AllowUnsafeLocalSandbox, "MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX", get("MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX"))
	c.envBool(&c.KubernetesPersistentWorkspace, "MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE", get("MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE"))
	c.envBool(&c.Web.FetchAllowPrivateNetworks, "MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS", get("MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS"))
	c.envDuration(&c.Web.FetchTimeout, "MANAGED_AGENT_WEB_FETCH_TIMEOUT", get("MANAGED_AGENT_WEB_FETCH_TIMEOUT"), "30s")
	c.envDuration(&c.Web.SearchTimeout, "MANAGED_AGENT_WEB_SEARCH_TIMEOUT", get("MANAGED_AGENT_WEB_SEARCH_TIMEOUT"), "15s")
	c.mcpFromEnv(get)
	c.rateLimitsFromLookup(get)
	return c
}

// minModelMaxTokens keeps room for adaptive thinking and a tool call in one answer.
const minModelMaxTokens = 1024

// envInt sets a whole-number variable's value v; a value that does not parse is kept for
// Validate.
func (c *Config) envInt(dst *int, name, v string) {
	if v == "" {
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		c.unparsed[name] = fmt.Sprintf("%s=%q: must be a whole number of tokens such as 16000, or 0", name, v)
	}
	*dst = n
}

// envDuration sets a duration variable's value v; a value that does not parse is kept for Validate,
// whose message shows example.
func (c *Config) envDuration(dst *time.Duration, name, v, example string) {
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		c.unparsed[name] = fmt.Sprintf("%s=%q: must be a duration such as %s", name, v, example)
	}
	*dst = d
}

// envBool sets a boolean variable's value v: 1/true/yes/on or 0/false/no/off, in any case. Anything
// else is kept for Validate, never read as false: MANAGED_AGENT_TEMPORAL_TLS=enabled must not
// silently dial without TLS.
func (c *Config) envBool(dst *bool, name, v string) {
	if v == "" {
		return
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		*dst = true
	case "0", "false", "no", "off":
		*dst = false
	default:
		c.unparsed[name] = fmt.Sprintf("%s=%q: must be a boolean: 1, true, yes, on or 0, false, no, off", name, v)
	}
}

// Logger validates the configuration and builds the process logger.
func (c Config) Logger() (*slog.Logger, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	level, err := c.logLevel()
	if err != nil {
		return nil, err
	}
	format, err := c.logFormat()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	out := c.LogOutput
	if out == nil {
		out = os.Stderr
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(out, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(out, opts)), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// dockerConfig parses the MANAGED_AGENT_DOCKER_* values; every problem names its variable.
func (c Config) dockerConfig() (docker.Config, error) {
	cfg := docker.Config{Image: c.DockerImage, Runtime: c.DockerRuntime, Deployment: c.DockerDeployment, Runner: c.DockerRunner}
	var errs []error
	netCfg, err := c.Network.dockerNetwork()
	errs = append(errs, err)
	cfg.Net = netCfg
	if c.DockerCPUs != "" {
		v, err := strconv.ParseFloat(c.DockerCPUs, 64)
		if err != nil || v < 0.01 || v > 1024 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_CPUS=%q: must be a CPU count from 0.01 to 1024, such as 1 or 0.5", c.DockerCPUs))
		}
		cfg.CPUs = v
	}
	if c.DockerMemory != "" {
		v, err := units.RAMInBytes(c.DockerMemory)
		if err != nil || v < 6<<20 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_MEMORY=%q: must be a size of at least 6m, such as 1g or 512m", c.DockerMemory))
		}
		cfg.MemoryBytes = v
	}
	if c.DockerPids != "" {
		v, err := strconv.ParseInt(c.DockerPids, 10, 64)
		if err != nil || v < 8 {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_PIDS=%q: must be a whole number of at least 8, such as 256", c.DockerPids))
		}
		cfg.Pids = v
	}
	switch v, err := units.RAMInBytes(c.DockerDisk); {
	case c.DockerDisk == "":
	case err == nil && v == 0:
		cfg.DiskBytes = docker.DiskUnbounded
	case err != nil || v < disks.MinSize:
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_DISK=%q: must be a size of at least 16m, such as 10g, or 0 to leave workspaces unbounded", c.DockerDisk))
	default:
		cfg.DiskBytes = v
	}
	if c.DockerDiskDir != "" {
		if !filepath.IsAbs(c.DockerDiskDir) {
			errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_DISK_DIR=%q: must be an absolute path", c.DockerDiskDir))
		}
		cfg.DiskDir = c.DockerDiskDir
	}
	if c.DockerDeployment != "" && !labelValue.MatchString(c.DockerDeployment) {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_DEPLOYMENT=%q: must be letters, digits, '.', '_' or '-' (at most 63)", c.DockerDeployment))
	}
	errs = append(errs, c.dockerPoolConfig(&cfg))
	return cfg, errors.Join(errs...)
}

var labelValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
