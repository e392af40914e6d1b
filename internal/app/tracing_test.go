package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/managed-agents/managed-agents/internal/tracing"
)

func TestTracingConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"off by default", nil, ""},
		{"none", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "none"}, ""},
		{"otlp-http", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "otlp-http", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ""},
		{"otlp-grpc with a traces endpoint", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "otlp-grpc", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:4317"}, ""},
		{"unknown exporter", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "jaeger"},
			`MANAGED_AGENT_OTEL_EXPORTER="jaeger": must be none, otlp-http or otlp-grpc`},
		{"endpoint without a scheme", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "otlp-grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"},
			`OTEL_EXPORTER_OTLP_ENDPOINT="collector:4317": must be an http or https URL`},
		{"traces endpoint of another scheme", map[string]string{"MANAGED_AGENT_OTEL_EXPORTER": "otlp-http", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x/v1/traces"},
			`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="ftp://x/v1/traces": must be an http or https URL`},
		{"endpoints are not ours to check while tracing is off", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := FromLookup(Config{}, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			err := c.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestTracingExportsOverOTLP builds the provider a role builds, from the variables, for each
// exporter, against a local receiver, and checks what arrives on the wire: the span with its
// attributes, the service name from OTEL_SERVICE_NAME and the role. Stopping flushes.
func TestTracingExportsOverOTLP(t *testing.T) {
	for _, exporter := range []string{exporterOTLPHTTP, exporterOTLPGRPC} {
		t.Run(exporter, func(t *testing.T) {
			got := make(chan *collectortrace.ExportTraceServiceRequest, 10)
			endpoint := otlpReceiver(t, exporter, got)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_SERVICE_NAME", "ma-test")
			cfg := FromEnv(Config{Tracing: TracingConfig{Exporter: exporter}})
			require.NoError(t, cfg.Validate())
			ctx := context.Background()
			cfg, stop, err := startTracing(ctx, cfg, "worker", slog.New(slog.NewTextHandler(io.Discard, nil)))
			require.NoError(t, err)
			_, span := tracing.Start(tracing.WithSession(ctx, "sesn_wire"), tracing.Tracer(cfg.Tracing.Provider), "step ModelTurn")
			span.End()
			stop()

			var req *collectortrace.ExportTraceServiceRequest
			select {
			case req = <-got:
			default:
				t.Fatal("stopping the provider exported nothing")
			}
			require.Len(t, req.ResourceSpans, 1)
			rs := req.ResourceSpans[0]
			res := attrsOf(rs.Resource.Attributes)
			require.Equal(t, "ma-test", res["service.name"], "OTEL_SERVICE_NAME overrides the default name")
			require.Equal(t, "worker", res["managed_agents.role"])
			require.Len(t, rs.ScopeSpans, 1)
			require.Equal(t, tracing.Name, rs.ScopeSpans[0].Scope.Name)
			require.Len(t, rs.ScopeSpans[0].Spans, 1)
			s := rs.ScopeSpans[0].Spans[0]
			require.Equal(t, "step ModelTurn", s.Name)
			require.Equal(t, "sesn_wire", attrsOf(s.Attributes)["managed_agents.session_id"])
		})
	}
}

// otlpReceiver serves the OTLP trace service on 127.0.0.1 over exporter's transport, sends
// each export it receives to got, and returns the endpoint URL.
func otlpReceiver(t *testing.T, exporter string, got chan<- *collectortrace.ExportTraceServiceRequest) string {
	t.Helper()
	if exporter == exporterOTLPHTTP {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			req := &collectortrace.ExportTraceServiceRequest{}
			if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
				http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
				return
			}
			got <- req
			b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(b)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, traceReceiver{got: got})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

type traceReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	got chan<- *collectortrace.ExportTraceServiceRequest
}

func (r traceReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.got <- req
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func attrsOf(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value.GetStringValue()
	}
	return out
}
