package app

import (
	"fmt"
	"os"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
)

// modelCatalog is the table of models the worker prices usage with: the built-in one, with
// the models of the JSON file MANAGED_AGENT_MODEL_CATALOG names laid over it (catalog's
// Override format; docs/costs.md).
func (c Config) modelCatalog() (*catalog.Table, error) {
	if c.ModelCatalog == "" {
		return catalog.Builtin(), nil
	}
	data, err := os.ReadFile(c.ModelCatalog)
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_MODEL_CATALOG=%q: %w", c.ModelCatalog, err)
	}
	t, err := catalog.Builtin().Override(data)
	if err != nil {
		return nil, fmt.Errorf("MANAGED_AGENT_MODEL_CATALOG=%q: %w (a JSON array of models; see docs/costs.md)", c.ModelCatalog, err)
	}
	return t, nil
}
