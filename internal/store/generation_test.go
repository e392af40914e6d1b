package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotifierGeneration: a session's generation grows with each of its wake-ups and never
// goes back, also when its last subscriber leaves and another comes (a read started at an
// old generation must never pass for a newer one).
func TestNotifierGeneration(t *testing.T) {
	ctx := context.Background()
	n := NewNotifier()
	_, stopA := n.Subscribe("a")
	_, stopB := n.Subscribe("b")
	g0 := n.Generation("a")
	n.Notify(ctx, "b:3")
	require.Equal(t, g0, n.Generation("a"), "another session's wake-up leaves a's generation")
	n.Notify(ctx, "a:4")
	g1 := n.Generation("a")
	require.Greater(t, g1, g0)
	n.Connected(ctx)
	g2 := n.Generation("a")
	require.Greater(t, g2, g1, "a reconnect wakes everyone")

	stopA()
	_, stopA = n.Subscribe("a")
	defer stopA()
	defer stopB()
	require.Greater(t, n.Generation("a"), g2, "a new first subscriber does not start over")
}
