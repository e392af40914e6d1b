package loadtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What `managed-agents dev` prints once it listens (internal/app/dev.go).
const devOutput = `managed-agents dev is running
  URL:      http://127.0.0.1:41234
  API key:  sk-ma-dev-abc_DEF-123 (generated; kept in the data dir)
  data dir: /tmp/x/data

Try:
  curl -s http://127.0.0.1:41234/v1/agents -H 'x-api-key: sk-ma-dev-abc_DEF-123'
`

func TestReadBanner(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	got := readBanner(strings.NewReader(devOutput), &log)
	require.Equal(t, devBanner{url: "http://127.0.0.1:41234", key: "sk-ma-dev-abc_DEF-123"}, got)
	require.Contains(t, log.String(), "URL:      http://127.0.0.1:41234\n", "what was read is logged")

	configured := readBanner(strings.NewReader("  URL:      http://127.0.0.1:1\n  API key:  my-key\n"), &log)
	require.Equal(t, devBanner{url: "http://127.0.0.1:1", key: "my-key"}, configured)

	require.Equal(t, devBanner{}, readBanner(strings.NewReader("error: no postgres\n"), &log))
}

func TestDevEnvTurnsLimitsOffUnlessSet(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"PATH=/bin", "MANAGED_AGENT_RATE_LIMIT_RPS=0", "MANAGED_AGENT_MAX_STREAMS_PER_KEY=0", "MANAGED_AGENT_SANDBOX_DIR=/tmp/b/sandboxes"},
		devEnv([]string{"PATH=/bin"}, "/tmp/b"))
	require.Equal(t, []string{"MANAGED_AGENT_RATE_LIMIT_RPS=5", "MANAGED_AGENT_SANDBOX_DIR=/s", "MANAGED_AGENT_MAX_STREAMS_PER_KEY=0"},
		devEnv([]string{"MANAGED_AGENT_RATE_LIMIT_RPS=5", "MANAGED_AGENT_SANDBOX_DIR=/s"}, "/tmp/b"))
}
