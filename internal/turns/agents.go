package turns

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// maxDecodedAgents bounds the agent snapshots a worker keeps decoded.
const maxDecodedAgents = 256

// decodedAgents keeps session agent snapshots decoded, by their stored JSON: every step reads
// its session's snapshot, which changes only when the session is updated, and decoding it
// (tools, MCP servers, skills) was a few per cent of a step's CPU. Keyed by the bytes
// themselves, a changed snapshot is a new entry, never a stale one. When full it starts
// over: the working set of a worker is its running sessions, well below the bound, and
// dropping everything at once keeps no bookkeeping on the hot path.
type decodedAgents struct {
	mu sync.Mutex
	m  map[string]wire.SessionAgent
}

// decodeAgent returns the session's agent snapshot decoded. The result may be shared with
// other callers: they read it and must not change its slices or maps.
func (s *Service) decodeAgent(rec store.SessionRecord) (wire.SessionAgent, error) {
	c := &s.agents
	c.mu.Lock()
	a, ok := c.m[string(rec.Agent)] // the conversion does not allocate for a lookup
	c.mu.Unlock()
	if ok {
		return a, nil
	}
	if err := json.Unmarshal(rec.Agent, &a); err != nil {
		return wire.SessionAgent{}, fmt.Errorf("decode agent snapshot of session %s: %w", rec.ID, err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxDecodedAgents {
		c.m = make(map[string]wire.SessionAgent)
	}
	c.m[string(rec.Agent)] = a
	c.mu.Unlock()
	return a, nil
}
