package stream

import (
	"testing"
)

func TestMemoryHub(t *testing.T) {
	t.Parallel()
	runHubSuite(t, func(*testing.T) hubHarness {
		hub := NewMemoryHub()
		return hubHarness{hub: hub, subscribe: func(_ *testing.T, sessionID string) (<-chan Frame, func()) {
			return hub.Subscribe(sessionID)
		}}
	})
}
