package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// servePprof serves Go's profiles (/debug/pprof/) on MANAGED_AGENT_PPROF_ADDR until ctx ends
// or stop is called. Off unless set: profiles show the process's internals (and a CPU
// profile costs while it runs), so they get a listener of their own that an operator opens on
// purpose (kubectl port-forward), never the API's or the metrics port.
func servePprof(ctx context.Context, cfg Config, logger *slog.Logger) (stop func(), err error) {
	if cfg.PprofAddr == "" || cfg.PprofAddr == "0" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.PprofAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (MANAGED_AGENT_PPROF_ADDR): %w", cfg.PprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Serve(ctx, ln, mux, logger, DefaultServerLimits); err != nil {
			logger.Error("pprof server stopped", "error", err)
		}
	}()
	logger.Info("serving pprof", "addr", ln.Addr().String())
	return func() {
		cancel()
		<-done
	}, nil
}
