package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/tools"
)

// BenchmarkBash measures one bash tool call on the local sandbox: decoding, the state-keeping
// script, one bash process and the result. It is the floor under every tool round.
func BenchmarkBash(b *testing.B) {
	ctx := context.Background()
	p := local.New(b.TempDir())
	ref, err := p.Create(ctx, sandbox.Spec{SessionID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(ctx, ref)
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"command":"true"}`)
	b.ReportAllocs()
	for b.Loop() {
		if res := tools.RunBuiltin(ctx, sb, "bash", input); res.IsError {
			b.Fatal(res.Text)
		}
	}
}
