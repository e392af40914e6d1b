package app

import (
	"fmt"

	"github.com/docker/go-units"

	"github.com/managed-agents/managed-agents/internal/turns"
)

// conversationCacheBytes is MANAGED_AGENT_CONVERSATION_CACHE: how much of its sessions' logs
// a worker keeps for model requests (a size such as 64m; 0 keeps none; unset, the default).
func (c Config) conversationCacheBytes() (int, error) {
	if c.ConversationCache == "" {
		return turns.DefaultConversationCacheBytes, nil
	}
	n, err := units.RAMInBytes(c.ConversationCache)
	if err != nil || n < 0 || n > maxConversationCache {
		return 0, fmt.Errorf("MANAGED_AGENT_CONVERSATION_CACHE=%q: must be a size from 0 (none kept) to 64g, such as 64m or 512m", c.ConversationCache)
	}
	return int(n), nil
}

const maxConversationCache = 64 << 30
