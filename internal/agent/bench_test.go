package agent_test

import (
	"context"
	"encoding/json"
	"strconv"
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

// BenchmarkDecodedTurnPart is the part of a long session's log a model step plans from
// (LoadConversation): 2,000 finished turns of six events, then the current turn's first
// two. Its cost should not grow with the turns before.
func BenchmarkDecodedTurnPart(b *testing.B) {
	running := func(id string) wire.Event { return ev(id, wire.EventSessionStatusRunning, `{}`) }
	var parts []any
	for i := range 2000 {
		n := strconv.Itoa(i)
		parts = append(parts, running("r"+n), userMsg("u"+n, "hi"), response(n, agentMsg("m"+n, "hello")), idle("i"+n, "end_turn"))
	}
	parts = append(parts, running("now"), userMsg("unow", "go"))
	h := withSeqs(hist(parts...))
	start := h[len(h)-2].Seq
	log, err := agent.DecodeLog(h)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if part := agent.DecodedTurnPart(log, start, log[len(log)-2:]); len(part) != 2 {
			b.Fatalf("turn part has %d events, want 2", len(part))
		}
	}
}
