package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// BenchmarkCoreRound is the in-process baseline the full stack is compared with: the fake
// model and a local sandbox, no database, no Temporal.
//
//   - round: one model/tool round, ModelTurn answering `/tool bash {"command":"true"}` and
//     ExecuteTool running it.
//   - turn: the whole one-tool turn through Runtime.Run (model, tool, model, end_turn).
//   - round_stub_tool: round with a tool runner that returns at once, which leaves the loop's
//     own cost (projection, planning, fake model, events) without the bash process.
func BenchmarkCoreRound(b *testing.B) {
	const msg = `{"content":[{"type":"text","text":"/tool bash {\"command\":\"true\"}"}]}`
	core := agent.NewCore(fake.New())
	ag := agentWith(b, allowTools)
	sb := newLocalSandbox(b)

	round := func(b *testing.B, core *agent.Core) {
		b.ReportAllocs()
		for b.Loop() {
			l := agent.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(msg), true)
			res, err := core.ModelTurn(b.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l})
			if err != nil || !res.Ran {
				b.Fatalf("model turn: ran=%t err=%v", res.Ran, err)
			}
			use := res.Events[0]
			if err := core.ExecuteTool(b.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, Sandbox: sb}, use); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("round", func(b *testing.B) { round(b, core) })
	b.Run("round_stub_tool", func(b *testing.B) {
		stub := agent.ToolRunnerFunc(func(context.Context, sandbox.Sandbox, string, string, json.RawMessage) agent.ToolResult {
			return agent.ToolResult{Text: "ok"}
		})
		round(b, agent.NewCore(fake.New(), agent.WithToolRunner(stub)))
	})
	b.Run("turn", func(b *testing.B) {
		rt := agent.NewRuntime(core)
		b.ReportAllocs()
		for b.Loop() {
			l := agent.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(msg), true)
			out, err := rt.Run(b.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, Sandbox: sb})
			if err != nil || out.StopReason != agent.StopEndTurn {
				b.Fatalf("run: %+v %v", out, err)
			}
		}
	})
}
