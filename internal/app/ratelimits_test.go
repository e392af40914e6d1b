package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRateLimitsFromLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		def     RateLimitConfig
		vars    map[string]string
		want    RateLimitConfig
		wantErr []string
	}{
		{name: "unset: the defaults", want: DefaultRateLimits},
		{name: "0 turns a limit off", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "0", "MANAGED_AGENT_MAX_STREAMS_PER_KEY": "0"},
			want: RateLimitConfig{Burst: DefaultRateLimits.Burst}},
		{name: "every variable", vars: map[string]string{
			"MANAGED_AGENT_RATE_LIMIT_RPS": "0.5", "MANAGED_AGENT_RATE_LIMIT_BURST": "3", "MANAGED_AGENT_MAX_STREAMS_PER_KEY": "4",
			"MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS": "5", "MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES": "6",
		}, want: RateLimitConfig{RequestsPerSecond: 0.5, Burst: 3, StreamsPerKey: 4, WorkspaceRunningSessions: 5, WorkspaceSandboxes: 6}},
		{name: "a caller's own limits replace the defaults", def: RateLimitConfig{WorkspaceSandboxes: 2},
			want: RateLimitConfig{WorkspaceSandboxes: 2}},
		{name: "dev: no request rate unless set", def: DevDefaults().RateLimits, want: RateLimitConfig{Burst: 100, StreamsPerKey: 100}},
		{name: "dev: a rate set alone gets the default burst", def: DevDefaults().RateLimits,
			vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "5"}, want: RateLimitConfig{RequestsPerSecond: 5, Burst: 100, StreamsPerKey: 100}},
		{name: "not numbers", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "fast", "MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES": "many"},
			wantErr: []string{`MANAGED_AGENT_RATE_LIMIT_RPS="fast": must be a number`, `MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES="many": must be a whole number`}},
		{name: "negative", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "-1", "MANAGED_AGENT_MAX_STREAMS_PER_KEY": "-2"},
			wantErr: []string{"MANAGED_AGENT_RATE_LIMIT_RPS=-1: must be 0 (no limit) or from 0.001 to 100000", "MANAGED_AGENT_MAX_STREAMS_PER_KEY=-2: must not be negative"}},
		{name: "too fast for the database's clock", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "1e7"},
			wantErr: []string{"MANAGED_AGENT_RATE_LIMIT_RPS=1e+07: must be 0 (no limit) or from 0.001 to 100000"}},
		{name: "not a number at all", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "NaN"},
			wantErr: []string{"MANAGED_AGENT_RATE_LIMIT_RPS=NaN: must be 0 (no limit) or from"}},
		{name: "too slow to represent", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "1e-10"},
			wantErr: []string{"must be 0 (no limit) or from 0.001"}},
		{name: "a bucket deeper than a day", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_RPS": "0.01", "MANAGED_AGENT_RATE_LIMIT_BURST": "100000"},
			wantErr: []string{"more than 24h0m0s to refill"}},
		{name: "a request limit needs a burst", vars: map[string]string{"MANAGED_AGENT_RATE_LIMIT_BURST": "0"},
			wantErr: []string{"MANAGED_AGENT_RATE_LIMIT_BURST=0: must be at least 1 with a request limit (MANAGED_AGENT_RATE_LIMIT_RPS=50)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := FromLookup(Config{RateLimits: tc.def}, func(name string) (string, bool) {
				v, ok := tc.vars[name]
				return v, ok
			})
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				require.Equal(t, tc.want, c.RateLimits)
				return
			}
			for _, want := range tc.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}
