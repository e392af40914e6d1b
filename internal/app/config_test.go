package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	t.Setenv("MANAGED_AGENT_ALLOW_UNSAFE_LOCAL_SANDBOX", "1")
	t.Setenv("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", "20ms")
	t.Setenv("MANAGED_AGENT_TEMPORAL_TASK_QUEUE", "q")
	c := FromEnv(Config{Addr: ":1"})
	require.NoError(t, c.Validate())
	require.Equal(t, "postgres://x", c.DatabaseURL)
	require.Equal(t, ":1", c.Addr)
	require.Equal(t, "anthropic", c.Model)
	require.True(t, c.AllowUnsafeLocalSandbox)
	require.Equal(t, 20*time.Millisecond, c.FakeWordDelay)
	require.Equal(t, "q", c.TaskQueue)
}

func TestInvalidConfigurationNamesTheVariable(t *testing.T) {
	t.Setenv("MANAGED_AGENT_FAKE_MODEL_WORD_DELAY", "soon")
	_, err := FromEnv(Config{}).Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_FAKE_MODEL_WORD_DELAY")

	_, err = Config{LogLevel: "loud"}.Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_LOG_LEVEL")
	_, err = Config{LogFormat: "xml"}.Logger()
	require.ErrorContains(t, err, "MANAGED_AGENT_LOG_FORMAT")

	_, err = NewModel(Config{Model: "gpt"})
	require.ErrorContains(t, err, "MANAGED_AGENT_MODEL")
	_, err = NewModel(Config{Model: "anthropic"})
	require.ErrorContains(t, err, "MANAGED_AGENT_ANTHROPIC_API_KEY")
	_, err = NewSandboxProvider(Config{Sandbox: "e2b"})
	require.ErrorContains(t, err, "MANAGED_AGENT_SANDBOX")
}
