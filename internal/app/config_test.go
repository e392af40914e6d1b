package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
)

func TestCheckSandboxGuard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults: fake model, local sandbox", Config{}, ""},
		{"fake model explicitly", Config{Model: "fake", Sandbox: "local"}, ""},
		{"real model with local sandbox is refused", Config{Model: "anthropic"}, "MANAGED_AGENT_SANDBOX=docker"},
		{"real model with explicit local sandbox is refused", Config{Model: "anthropic", Sandbox: "local"}, "MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX=1"},
		{"real model with local sandbox, risk accepted", Config{Model: "anthropic", AllowUnsafeLocalSandbox: true}, ""},
		{"real model with another sandbox", Config{Model: "anthropic", Sandbox: "docker"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckSandboxGuard(tt.cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, err, "not a security boundary")
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("MANAGED_AGENT_DATABASE_URL", "postgres://x")
	t.Setenv("MANAGED_AGENT_MODEL", "anthropic")
	t.Setenv("MANAGED_AGENT_ANTHROPIC_API_KEY", "k") // Validate now checks the whole configuration
	t.Setenv("MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX", "1")
	t.Setenv("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", "20ms")
	t.Setenv("MANAGED_AGENT_TEMPORAL_TASK_QUEUE", "q")
	t.Setenv("MANAGED_AGENT_MODEL_MAX_TOKENS", "16000")
	c := FromEnv(Config{Addr: ":1"})
	require.NoError(t, c.Validate())
	require.Equal(t, "postgres://x", c.DatabaseURL)
	require.Equal(t, ":1", c.Addr)
	require.Equal(t, "anthropic", c.Model)
	require.True(t, c.AllowUnsafeLocalSandbox)
	require.Equal(t, 20*time.Millisecond, c.FakeWordDelay)
	require.Equal(t, "q", c.TaskQueue)
	require.Equal(t, 16000, c.ModelMaxTokens)
}

// TestFromLookupPrefersHandedOverValues: main hands over credentials it keeps out of the
// environment; they win over (and need no) variables.
func TestFromLookupPrefersHandedOverValues(t *testing.T) {
	t.Setenv("MANAGED_AGENT_WORKER_STOP_TIMEOUT", "3s")
	c := FromLookup(Config{}, func(name string) (string, bool) {
		if name == "MANAGED_AGENT_API_KEY" {
			return "handed-over", true
		}
		return os.LookupEnv(name)
	})
	require.NoError(t, c.Validate())
	require.Equal(t, "handed-over", c.APIKey)
	require.Equal(t, 3*time.Second, c.WorkerStopTimeout)
}

func TestInvalidConfigurationNamesTheVariable(t *testing.T) {
	t.Setenv("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", "soon")
	_, err := FromEnv(Config{}).Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_FAKE_MODEL_WORD_DELAY")
	t.Setenv("MANAGED_AGENT_MODEL_MAX_TOKENS", "lots")
	require.ErrorContains(t, FromEnv(Config{}).Validate(), `MANAGED_AGENT_MODEL_MAX_TOKENS="lots": must be a whole number`)
	t.Setenv("MANAGED_AGENT_WORKER_STOP_TIMEOUT", "later")
	t.Setenv("MANAGED_AGENT_SANDBOX_IDLE_STOP", "soon")
	_, err = FromEnv(Config{}).Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_WORKER_STOP_TIMEOUT")
	require.ErrorContains(t, err, `MANAGED_AGENT_SANDBOX_IDLE_STOP="soon": must be a duration such as 30m`)
	t.Setenv("MANAGED_AGENT_STARTUP_TIMEOUT", "forever")
	require.ErrorContains(t, FromEnv(Config{}).Validate(), `MANAGED_AGENT_STARTUP_TIMEOUT="forever": must be a duration such as 5m`)
	require.ErrorContains(t, Config{StartupTimeout: -time.Second}.Validate(), "MANAGED_AGENT_STARTUP_TIMEOUT=-1s: must not be negative")
	t.Setenv("MANAGED_AGENT_STARTUP_TIMEOUT", "90s")
	require.Equal(t, 90*time.Second, FromEnv(Config{}).startupTimeout())
	require.Equal(t, DefaultStartupTimeout, Config{}.startupTimeout())

	_, err = Config{LogLevel: "loud"}.Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_LOG_LEVEL")
	_, err = Config{LogFormat: "xml"}.Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_LOG_FORMAT")

	_, err = NewModel(Config{Model: "gpt"})
	require.ErrorContains(t, err, "MANAGED_AGENT_MODEL")
	_, err = NewModel(Config{Model: "anthropic"})
	require.ErrorContains(t, err, "MANAGED_AGENT_ANTHROPIC_API_KEY")
	_, err = NewSandboxProvider(Config{Sandbox: "firecracker"})
	require.ErrorContains(t, err, "MANAGED_AGENT_SANDBOX")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	anthropicOK := Config{Model: "anthropic", AnthropicAPIKey: "k", AllowUnsafeLocalSandbox: true}
	with := func(c Config, f func(*Config)) Config { f(&c); return c }
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // each must appear; empty: valid
		notErr  []string // must not appear
	}{
		{name: "defaults", cfg: Config{}},
		{name: "everything set and valid", cfg: Config{Model: "anthropic", AnthropicAuthToken: "t", AnthropicBaseURL: "https://example.test",
			Sandbox: "local", AllowUnsafeLocalSandbox: true, Addr: ":8080", TemporalAddress: "temporal:7233",
			DatabaseURL: "postgres://u:p@db:5432/x", LogLevel: "debug", LogFormat: "TEXT", FakeWordDelay: time.Millisecond}},
		{name: "an unknown model names the allowed values, not the guard",
			cfg: Config{Model: "bogus"}, wantErr: []string{`MANAGED_AGENT_MODEL="bogus": must be fake or anthropic`}, notErr: []string{"not a security boundary"}},
		{name: "anthropic needs a key", cfg: Config{Model: "anthropic", AllowUnsafeLocalSandbox: true},
			wantErr: []string{"MANAGED_AGENT_ANTHROPIC_API_KEY or MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN"}},
		{name: "anthropic base URL must be a URL", cfg: with(anthropicOK, func(c *Config) { c.AnthropicBaseURL = "api.anthropic.com" }),
			wantErr: []string{"MANAGED_AGENT_ANTHROPIC_BASE_URL", "http or https URL"}},
		{name: "an unknown sandbox names the providers", cfg: Config{Sandbox: "firecracker"}, wantErr: []string{`MANAGED_AGENT_SANDBOX="firecracker": must be one of local`}},
		{name: "an unknown sandbox with a real model: no guard message", cfg: Config{Model: "anthropic", AnthropicAPIKey: "k", Sandbox: "firecracker"},
			wantErr: []string{"MANAGED_AGENT_SANDBOX"}, notErr: []string{"not a security boundary"}},
		{name: "negative delay", cfg: Config{FakeWordDelay: -time.Second}, wantErr: []string{"MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", "negative"}},
		{name: "max tokens too small", cfg: Config{ModelMaxTokens: 100}, wantErr: []string{"MANAGED_AGENT_MODEL_MAX_TOKENS=100", "at least 1024"}},
		{name: "max tokens negative", cfg: Config{ModelMaxTokens: -1}, wantErr: []string{"MANAGED_AGENT_MODEL_MAX_TOKENS=-1"}},
		{name: "log level", cfg: Config{LogLevel: "loud"}, wantErr: []string{"MANAGED_AGENT_LOG_LEVEL", "debug, info, warn or error"}},
		{name: "log format", cfg: Config{LogFormat: "xml"}, wantErr: []string{"MANAGED_AGENT_LOG_FORMAT", "json or text"}},
		{name: "listen address", cfg: Config{Addr: "8080"}, wantErr: []string{`MANAGED_AGENT_ADDR="8080": must be host:port`}},
		{name: "Temporal address", cfg: Config{TemporalAddress: "temporal"}, wantErr: []string{`MANAGED_AGENT_TEMPORAL_ADDRESS="temporal"`}},
		{name: "database URL, without echoing it", cfg: Config{DatabaseURL: "postgres://u:secret@db:notaport/x"},
			wantErr: []string{"MANAGED_AGENT_DATABASE_URL"}, notErr: []string{"secret"}},
		{name: "the guard, when model and sandbox are valid", cfg: Config{Model: "anthropic", AnthropicAPIKey: "k"},
			wantErr: []string{"not a security boundary", "MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX=1"}},
		{name: "a real model with the docker sandbox needs no override", cfg: Config{Model: "anthropic", AnthropicAPIKey: "k", Sandbox: "docker",
			DockerImage: "img:1", DockerCPUs: "0.5", DockerMemory: "512m", DockerPids: "128", DockerRuntime: "runsc", DockerDeployment: "prod-eu"}},
		{name: "idle clocks", cfg: Config{SandboxIdleStop: 30 * time.Minute, SandboxRetention: 720 * time.Hour}},
		{name: "idle clocks below a minute", cfg: Config{SandboxIdleStop: time.Second, SandboxRetention: -time.Hour},
			wantErr: []string{"MANAGED_AGENT_SANDBOX_IDLE_STOP=1s: must be 0 (off) or at least 1m0s", "MANAGED_AGENT_SANDBOX_RETENTION=-1h0m0s"}},
		{name: "retention not after the idle stop", cfg: Config{SandboxIdleStop: time.Hour, SandboxRetention: time.Hour},
			wantErr: []string{"MANAGED_AGENT_SANDBOX_RETENTION=1h0m0s: must be longer than MANAGED_AGENT_SANDBOX_IDLE_STOP"}},
		{name: "docker settings name their variables",
			cfg:     Config{Sandbox: "docker", DockerCPUs: "lots", DockerMemory: "1 banana", DockerPids: "3", DockerDeployment: "a b"},
			wantErr: []string{`MANAGED_AGENT_DOCKER_CPUS="lots"`, `MANAGED_AGENT_DOCKER_MEMORY="1 banana"`, `MANAGED_AGENT_DOCKER_PIDS="3"`, `MANAGED_AGENT_DOCKER_DEPLOYMENT="a b"`}},
		{name: "docker limits too small", cfg: Config{DockerCPUs: "0", DockerMemory: "1m"},
			wantErr: []string{"MANAGED_AGENT_DOCKER_CPUS", "MANAGED_AGENT_DOCKER_MEMORY", "at least 6m"}},
		{name: "every problem at once, in order", cfg: Config{Model: "bogus", LogLevel: "loud", Addr: "x"},
			wantErr: []string{"MANAGED_AGENT_MODEL", "MANAGED_AGENT_LOG_LEVEL", "MANAGED_AGENT_ADDR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			last := -1
			for _, want := range tt.wantErr {
				i := strings.Index(err.Error(), want)
				require.Greater(t, i, last, "%q in order in %q", want, err.Error())
				last = i
			}
			for _, not := range tt.notErr {
				require.NotContains(t, err.Error(), not)
			}
		})
	}
}

func TestFromEnvBooleans(t *testing.T) {
	tests := []struct {
		value   string
		want    bool
		wantErr bool
	}{
		{"1", true, false}, {"true", true, false}, {"YES", true, false}, {"On", true, false},
		{"0", false, false}, {"false", false, false}, {"No", false, false}, {"OFF", false, false},
		{"enabled", false, true}, {"2", false, true}, {"y", false, true},
	}
	for _, name := range []string{"MANAGED_AGENT_TEMPORAL_TLS", "MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX"} {
		for _, tt := range tests {
			t.Run(name+"="+tt.value, func(t *testing.T) {
				t.Setenv(name, tt.value)
				c := FromEnv(Config{})
				err := c.Validate()
				if tt.wantErr {
					require.ErrorContains(t, err, name+`="`+tt.value+`": must be a boolean`)
					return
				}
				require.NoError(t, err)
				got := map[string]bool{"MANAGED_AGENT_TEMPORAL_TLS": c.TemporalTLS, "MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX": c.AllowUnsafeLocalSandbox}[name]
				require.Equal(t, tt.want, got)
			})
		}
	}
}

// A bad value stops dev before it creates the data dir, starts PostgreSQL or Temporal.
func TestRunDevValidatesFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"unknown model", Config{Model: "bogus"}, "must be fake or anthropic"},
		{"real model on the local sandbox", Config{Model: "anthropic", AnthropicAPIKey: "k"}, "not a security boundary"},
		{"bad log format", Config{LogFormat: "xml"}, "MANAGED_AGENT_LOG_FORMAT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "data")
			tt.cfg.DataDir = dataDir
			require.ErrorContains(t, RunDev(t.Context(), tt.cfg), tt.wantErr)
			require.NoDirExists(t, dataDir)
		})
	}
}

func TestDockerFromEnv(t *testing.T) {
	t.Setenv("MANAGED_AGENT_SANDBOX", "docker")
	t.Setenv("MANAGED_AGENT_DOCKER_IMAGE", "img:2")
	t.Setenv("MANAGED_AGENT_DOCKER_CPUS", "2")
	t.Setenv("MANAGED_AGENT_DOCKER_MEMORY", "256m")
	t.Setenv("MANAGED_AGENT_DOCKER_PIDS", "64")
	t.Setenv("MANAGED_AGENT_DOCKER_RUNTIME", "runsc")
	t.Setenv("MANAGED_AGENT_DOCKER_DEPLOYMENT", "staging")
	t.Setenv("MANAGED_AGENT_DOCKER_DISK", "0") // unbounded: bounded disks need root, which unit tests may not have
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv("MANAGED_AGENT_DOCKER_RUNNER", exe)
	c := FromEnv(Config{})
	require.NoError(t, c.Validate())
	cfg, err := c.dockerConfig()
	require.NoError(t, err)
	require.Equal(t, docker.Config{Image: "img:2", CPUs: 2, MemoryBytes: 256 << 20, Pids: 64, Runtime: "runsc", Deployment: "staging", Runner: exe, DiskBytes: docker.DiskUnbounded}, cfg)
	p, err := NewSandboxProvider(c)
	require.NoError(t, err)
	require.Equal(t, "docker", p.Name())
	require.NoError(t, p.(*docker.Provider).Close())
}

func TestDockerDiskFromEnv(t *testing.T) {
	for _, tt := range []struct {
		disk, dir string
		want      int64
		wantErr   string
	}{
		{"", "", 0, ""}, // the provider's default
		{"0", "", docker.DiskUnbounded, ""},
		{"2g", "/srv/disks", 2 << 30, ""},
		{"512m", "", 512 << 20, ""},
		{"1m", "", 0, "MANAGED_AGENT_DOCKER_DISK=\"1m\": must be a size of at least 16m"},
		{"lots", "", 0, "MANAGED_AGENT_DOCKER_DISK=\"lots\""},
		{"-5g", "", 0, "MANAGED_AGENT_DOCKER_DISK=\"-5g\""},
		{"1g", "disks", 0, "MANAGED_AGENT_DOCKER_DISK_DIR=\"disks\": must be an absolute path"},
	} {
		t.Run(tt.disk+"|"+tt.dir, func(t *testing.T) {
			cfg, err := Config{DockerDisk: tt.disk, DockerDiskDir: tt.dir}.dockerConfig()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg.DiskBytes)
			require.Equal(t, tt.dir, cfg.DiskDir)
		})
	}
}
