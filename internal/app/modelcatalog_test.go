package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
)

func TestModelCatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := write("good.json", `[{"id": "claude-opus-5", "price": {"input": 4}}, {"id": "in-house-1", "context_window": 32000, "max_output_tokens": 4096}]`)
	tests := []struct {
		name    string
		path    string
		wantErr []string
	}{
		{name: "unset: the built-in table"},
		{name: "a good file", path: good},
		{name: "a missing file", path: filepath.Join(dir, "nope.json"), wantErr: []string{"MANAGED_AGENT_MODEL_CATALOG=", "nope.json", "no such file"}},
		{name: "not JSON", path: write("bad.json", `models: []`), wantErr: []string{"MANAGED_AGENT_MODEL_CATALOG=", "JSON array"}},
		{name: "an unknown field names the entry", path: write("field.json", `[{"id": "a"}, {"id": "b", "pricing": {}}]`),
			wantErr: []string{"MANAGED_AGENT_MODEL_CATALOG=", `entry 1 ("b")`, `unknown field "pricing"`}},
		{name: "a negative price", path: write("neg.json", `[{"id": "a", "price": {"output": -1}}]`),
			wantErr: []string{"MANAGED_AGENT_MODEL_CATALOG=", "price.output -1: must not be negative"}},
		{name: "a bad thinking mode", path: write("think.json", `[{"id": "a", "thinking": "deep"}]`),
			wantErr: []string{"MANAGED_AGENT_MODEL_CATALOG=", `thinking "deep"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := FromLookup(Config{}, func(name string) (string, bool) {
				if name == "MANAGED_AGENT_MODEL_CATALOG" && tt.path != "" {
					return tt.path, true
				}
				return "", false
			})
			require.Equal(t, tt.path, cfg.ModelCatalog)
			models, err := cfg.modelCatalog()
			validateErr := cfg.Validate()
			if len(tt.wantErr) > 0 {
				for _, want := range tt.wantErr {
					require.ErrorContains(t, err, want)
					require.ErrorContains(t, validateErr, want, "Validate refuses it before anything starts")
				}
				return
			}
			require.NoError(t, err)
			require.NoError(t, validateErr)
			if tt.path == "" {
				require.Same(t, catalog.Builtin(), models)
				return
			}
			opus, ok := models.Lookup("claude-opus-5")
			require.True(t, ok)
			require.InDelta(t, 4, opus.Price.Input, 0)
			require.InDelta(t, 25, opus.Price.Output, 0, "fields the file leaves out keep the built-in value")
			own, ok := models.Lookup("in-house-1")
			require.True(t, ok)
			require.Equal(t, 32000, own.ContextWindow)
		})
	}
}
