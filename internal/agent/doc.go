// Package agent owns the agent loop: it turns a session's event log into a model
// conversation, calls the model, executes allowed built-in tools in the session sandbox, parks
// when a client must act, and emits every step as events.
//
// The event log is the only state. Three pure functions read it:
//   - Project builds the model conversation from the log.
//   - Next decides, from the log alone, the next step of the current turn.
//   - TurnUsage sums the model usage of the latest turn.
//
// Core performs one step at a time (ModelTurn, ExecuteTool, RejectTools, StopAtCap), so a
// durable workflow can run each step as its own activity; Runtime.Run loops Next and the
// steps in memory until the turn ends or parks. Next works on a turn's log (the events since
// the turn started plus queued client events) as well as on the whole log; only Project needs
// the whole conversation.
//
// Idempotency rule: every step method first re-derives, from the history it is given, whether
// its step is still due, and does nothing if it is not. A step retried after a crash therefore
// sees what is already committed: a tool whose agent.tool_result is in the log is not run
// again, and a model turn whose response is in the log is not called again, so no second
// agent.message is appended. A tool that ran but whose result did not commit is not run twice
// either: built-ins run under their tool_use id with tools.RunBuiltinOnce, which keeps per-call
// records in the sandbox. Each model response (with its span.model_request_end) is emitted
// in one Emit call, which callers must append atomically. For this to hold, the history passed
// in must be read from the log after the previous step committed.
//
// Log order is delivery order: events are read in log order, and client events whose
// processed_at is null are queued, not yet delivered, and ignored. A caller that delivers a
// queued event must not leave it before events committed while it was queued (the hosted
// service puts a queued user.message into the log when it is delivered, API.md §17).
//
// The package never touches the database, Temporal or HTTP: events leave through an Emitter,
// previews through a PreviewSink, and the sandbox is asked for through a SandboxSource only
// when a built-in tool actually runs. It imports only model, tools, sandbox, wire and ids; it
// must never import store, httpapi, sessions, workflow, Temporal or Kubernetes packages.
// Session status transitions (session.status_*, session.usage) belong to the caller.
package agent
