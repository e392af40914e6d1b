package app

import (
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServePprofOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, off := range []string{"", "0"} {
		stop, err := servePprof(t.Context(), Config{PprofAddr: off}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		stop()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	stop, err := servePprof(t.Context(), Config{PprofAddr: addr}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer stop()
	require.Contains(t, get(t, "http://"+addr+"/debug/pprof/"), "goroutine")
	require.Contains(t, get(t, "http://"+addr+"/debug/pprof/cmdline"), "app.test")

	// A taken address fails the role's start, naming the variable.
	_, err = servePprof(t.Context(), Config{PprofAddr: addr}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "MANAGED_AGENT_PPROF_ADDR")
}
