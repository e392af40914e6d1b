package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
)

// BenchmarkBash measures one bash tool call on the local sandbox: decoding, the state-keeping
// script, one bash process and the result. It is the floor under every tool round.
func BenchmarkBash(b *testing.B) {
	ctx := context.Background()
	sb := benchSandbox(b)
	input := json.RawMessage(`{"command":"true"}`)
	b.ReportAllocs()
	for b.Loop() {
		if res := tools.RunBuiltin(ctx, sb, "bash", input); res.IsError {
			b.Fatal(res.Text)
		}
	}
}

// BenchmarkBashOnce is BenchmarkBash with call records (RunBuiltinOnce, what the runtime
// uses): the difference is the price of running each call exactly once. Replay measures a
// retry that finds the call done.
func BenchmarkBashOnce(b *testing.B) {
	ctx := context.Background()
	input := json.RawMessage(`{"command":"echo hello"}`)
	b.Run("first", func(b *testing.B) {
		sb := benchSandbox(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if res := tools.RunBuiltinOnce(ctx, sb, fmt.Sprintf("sevt_first%d", i), "bash", input); res.IsError {
				b.Fatal(res.Text)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		sb := benchSandbox(b)
		if res := tools.RunBuiltinOnce(ctx, sb, "sevt_replay", "bash", input); res.IsError {
			b.Fatal(res.Text)
		}
		b.ReportAllocs()
		for b.Loop() {
			if res := tools.RunBuiltinOnce(ctx, sb, "sevt_replay", "bash", input); res.IsError {
				b.Fatal(res.Text)
			}
		}
	})
}

func benchSandbox(b *testing.B) sandbox.Sandbox {
	b.Helper()
	ctx := context.Background()
	p := local.New(b.TempDir())
	ref, err := p.Create(ctx, sandbox.Spec{Name: "bench", SessionID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(ctx, ref)
	if err != nil {
		b.Fatal(err)
	}
	return sb
}

// BenchmarkGrep searches 500 files with the sandbox's FileSearcher and with the fallback
// (one find, then one ReadFile per file): on a remote provider each of those is a round trip.
func BenchmarkGrep(b *testing.B) {
	ctx := context.Background()
	input := json.RawMessage(`{"pattern":"needle \\d+"}`)
	for _, way := range []struct {
		name string
		wrap func(sandbox.Sandbox) sandbox.Sandbox
	}{
		{"capability", func(sb sandbox.Sandbox) sandbox.Sandbox { return sb }},
		{"fallback", toolstest.HideCapabilities},
	} {
		b.Run(way.name, func(b *testing.B) {
			sb := benchSandbox(b)
			for i := range 500 {
				if err := sb.WriteFile(ctx, fmt.Sprintf("src/d%d/f%d.txt", i%10, i), []byte(fmt.Sprintf("hay\nneedle %d\nhay\n", i))); err != nil {
					b.Fatal(err)
				}
			}
			sb = way.wrap(sb)
			b.ReportAllocs()
			for b.Loop() {
				if res := tools.RunBuiltin(ctx, sb, "grep", input); res.IsError {
					b.Fatal(res.Text)
				}
			}
		})
	}
}
