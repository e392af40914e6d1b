package app

import (
	"context"
	"log/slog"
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
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveSide(ctx, "pprof", cfg.PprofAddr, "MANAGED_AGENT_PPROF_ADDR", mux, logger)
}
