package controllers

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestSessionEventsWakeTheOwningResource(t *testing.T) {
	ctx := context.Background()
	e := NewSessionEvents()
	e.track("sesn_a", types.NamespacedName{Namespace: "ns", Name: "a"})
	e.track("sesn_b", types.NamespacedName{Namespace: "ns", Name: "b"})

	e.Notify(ctx, "sesn_a:17")
	got := <-e.ch
	require.Equal(t, "a", got.Object.GetName())
	require.Equal(t, "ns", got.Object.GetNamespace())

	e.Notify(ctx, "sesn_unknown:3") // a session no resource owns: nothing
	require.Empty(t, e.ch)

	e.forget("sesn_b")
	e.Connected(ctx) // after a reconnect every tracked Session is looked at
	require.Len(t, e.ch, 1)
	require.Equal(t, "a", (<-e.ch).Object.GetName())

	// A full buffer holds the listener back only until its context ends.
	for range cap(e.ch) {
		e.Notify(ctx, "sesn_a:1")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	e.Notify(cancelled, "sesn_a:2")
	require.Len(t, e.ch, cap(e.ch))
}
