package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/runtime"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// BenchmarkCoreRound is the in-process baseline the full stack is compared with: the fake
// model and a local sandbox, no database, no Temporal.
//
//   - round: one model/tool round, ModelTurn answering `/tool bash {"command":"true"}` and
//     ExecuteTool running it.
//   - turn: the whole one-tool turn through AgentRuntime.Run (model, tool, model, end_turn).
//   - round_stub_tool: round with a tool runner that returns at once, which leaves the loop's
//     own cost (projection, planning, fake model, events) without the bash process.
func BenchmarkCoreRound(b *testing.B) {
	const msg = `{"content":[{"type":"text","text":"/tool bash {\"command\":\"true\"}"}]}`
	core := runtime.NewCore(fake.New())
	agent := agentWith(b, allowTools)
	sb := newLocalSandbox(b)

	round := func(b *testing.B, core *runtime.Core) {
		b.ReportAllocs()
		for b.Loop() {
			l := runtime.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(msg), true)
			res, err := core.ModelTurn(b.Context(), runtime.Input{Agent: agent, History: l.Events(), Emitter: l})
			if err != nil || !res.Ran {
				b.Fatalf("model turn: ran=%t err=%v", res.Ran, err)
			}
			use := res.Events[0]
			if err := core.ExecuteTool(b.Context(), runtime.Input{Agent: agent, History: l.Events(), Emitter: l, Sandbox: sb}, use); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("round", func(b *testing.B) { round(b, core) })
	b.Run("round_stub_tool", func(b *testing.B) {
		stub := runtime.ToolRunnerFunc(func(context.Context, sandbox.Sandbox, string, string, json.RawMessage) runtime.ToolResult {
			return runtime.ToolResult{Text: "ok"}
		})
		round(b, runtime.NewCore(fake.New(), runtime.WithToolRunner(stub)))
	})
	b.Run("turn", func(b *testing.B) {
		rt := runtime.NewAgentRuntime(core)
		b.ReportAllocs()
		for b.Loop() {
			l := runtime.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(msg), true)
			out, err := rt.Run(b.Context(), runtime.Input{Agent: agent, History: l.Events(), Emitter: l, Sandbox: sb})
			if err != nil || out.StopReason != runtime.StopEndTurn {
				b.Fatalf("run: %+v %v", out, err)
			}
		}
	})
}
