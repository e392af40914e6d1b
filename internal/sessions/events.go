package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// clientEvent is the union of client event fields; DecodeStrict rejects anything else, and
// per-type checks reject fields that do not belong to the event's type.
type clientEvent struct {
	Type            string               `json:"type"`
	Content         *[]wire.ContentBlock `json:"content"`
	SessionThreadID *string              `json:"session_thread_id"`
	ToolUseID       *string              `json:"tool_use_id"`
	Result          *string              `json:"result"`
	DenyMessage     *string              `json:"deny_message"`
	CustomToolUseID *string              `json:"custom_tool_use_id"`
	IsError         *bool                `json:"is_error"`
	Description     *string              `json:"description"`
	Rubric          json.RawMessage      `json:"rubric"`
	MaxIterations   *int                 `json:"max_iterations"`
}

// parsedEvent is a validated client event ready to append.
type parsedEvent struct {
	store.NewEvent
	// ref is the event id this event answers, if any.
	ref string
}

func parseInitialEvents(raw []json.RawMessage) ([]store.NewEvent, error) {
	if len(raw) > maxInitialEvents {
		return nil, invalidf("initial_events: at most %d events are allowed", maxInitialEvents)
	}
	out := make([]store.NewEvent, 0, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("initial_events[%d]", i)
		ev, err := decodeClientEvent(field, r)
		if err != nil {
			return nil, err
		}
		if ev.Type != wire.EventUserMessage {
			return nil, invalidf("%s.type: only user.message is allowed in initial_events", field)
		}
		p, err := buildClientEvent(field, ev, false)
		if err != nil {
			return nil, err
		}
		out = append(out, p.NewEvent)
	}
	return out, nil
}

func decodeClientEvent(field string, raw json.RawMessage) (clientEvent, error) {
	var ev clientEvent
	if err := wire.DecodeStrict(raw, &ev); err != nil {
		return ev, invalidf("%s: %v", field, err)
	}
	return ev, nil
}

// buildClientEvent checks one event's fields for its type (API.md §5.2) and returns its
// stored form. selfHosted allows user.tool_result.
func buildClientEvent(field string, ev clientEvent, selfHosted bool) (parsedEvent, error) {
	has := map[string]bool{
		"content": ev.Content != nil, "session_thread_id": ev.SessionThreadID != nil, "tool_use_id": ev.ToolUseID != nil,
		"result": ev.Result != nil, "deny_message": ev.DenyMessage != nil, "custom_tool_use_id": ev.CustomToolUseID != nil,
		"is_error": ev.IsError != nil, "description": ev.Description != nil, "rubric": ev.Rubric != nil, "max_iterations": ev.MaxIterations != nil,
	}
	allowOnly := func(allowed ...string) error {
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[a] = true
		}
		for name, present := range has {
			if present && !ok[name] {
				return invalidf("%s.%s: not a field of %s", field, name, ev.Type)
			}
		}
		return nil
	}
	var body any
	var p parsedEvent
	p.Type = ev.Type
	switch ev.Type {
	case wire.EventUserMessage:
		if err := allowOnly("content"); err != nil {
			return p, err
		}
		if ev.Content == nil || len(*ev.Content) == 0 {
			return p, invalidf("%s.content: must have at least one block", field)
		}
		if err := wire.ValidateContent(field+".content", *ev.Content, wire.UserMessageBlocks); err != nil {
			return p, invalidf("%s", err.Error())
		}
		body = wire.MessageBody{Content: *ev.Content}
	case wire.EventUserInterrupt:
		if err := allowOnly("session_thread_id"); err != nil {
			return p, err
		}
		if ev.SessionThreadID != nil {
			return p, invalidf("%s.session_thread_id: this session has no thread %q (multiagent threads are not supported yet)", field, wire.Excerpt(*ev.SessionThreadID, maxQuoted))
		}
		body = wire.UserInterruptBody{}
	case wire.EventUserToolConfirmation:
		// session_thread_id is accepted and ignored: answers are routed by event id (API.md §15 row 30).
		if err := allowOnly("tool_use_id", "result", "deny_message", "session_thread_id"); err != nil {
			return p, err
		}
		if ev.ToolUseID == nil || *ev.ToolUseID == "" {
			return p, invalidf("%s.tool_use_id: is required", field)
		}
		if ev.Result == nil || (*ev.Result != wire.PermissionResultAllow && *ev.Result != wire.PermissionResultDeny) {
			return p, invalidf("%s.result: must be allow or deny", field)
		}
		if ev.DenyMessage != nil && *ev.Result != wire.PermissionResultDeny {
			return p, invalidf("%s.deny_message: only allowed with result deny", field)
		}
		body = wire.ToolConfirmationBody{ToolUseID: *ev.ToolUseID, Result: *ev.Result, DenyMessage: ev.DenyMessage}
		p.ref = *ev.ToolUseID
		// Answers apply on receipt; the stream shows them before the run resumes (API.md §17).
		p.Processed = true
	case wire.EventUserCustomToolResult, wire.EventUserToolResult:
		idField, idVal := "custom_tool_use_id", ev.CustomToolUseID
		if ev.Type == wire.EventUserToolResult {
			if !selfHosted {
				return p, invalidf("%s.type: user.tool_result is only accepted on self_hosted environments", field)
			}
			idField, idVal = "tool_use_id", ev.ToolUseID
		}
		if err := allowOnly(idField, "content", "is_error", "session_thread_id"); err != nil {
			return p, err
		}
		if idVal == nil || *idVal == "" {
			return p, invalidf("%s.%s: is required", field, idField)
		}
		var content []wire.ContentBlock // nil: not sent; an empty list is kept as sent
		if ev.Content != nil {
			if err := wire.ValidateContent(field+".content", *ev.Content, wire.ToolResultBlocks); err != nil {
				return p, invalidf("%s", err.Error())
			}
			content = *ev.Content
			if content == nil {
				content = []wire.ContentBlock{}
			}
		}
		if ev.Type == wire.EventUserToolResult {
			body = wire.UserToolResultBody{ToolUseID: *idVal, Content: content, IsError: ev.IsError}
		} else {
			body = wire.UserCustomToolResultBody{CustomToolUseID: *idVal, Content: content, IsError: ev.IsError}
		}
		// Results are processed on receipt (API.md §5.1).
		p.Processed = true
		p.ref = *idVal
	case wire.EventUserDefineOutcome:
		return p, invalidf("%s.type: user.define_outcome is not supported by this server yet", field)
	case wire.EventSystemMessage:
		// Where it may stand and whether the model takes it is checked for the whole request
		// (checkSystemMessages).
		if err := allowOnly("content"); err != nil {
			return p, err
		}
		if ev.Content == nil || len(*ev.Content) == 0 {
			return p, invalidf("%s.content: must have at least one block", field)
		}
		if len(*ev.Content) > maxSystemMessageBlocks {
			return p, invalidf("%s.content: at most %d blocks", field, maxSystemMessageBlocks)
		}
		if err := wire.ValidateContent(field+".content", *ev.Content, map[string]bool{wire.ContentTypeText: true}); err != nil {
			return p, invalidf("%s", err.Error())
		}
		body = wire.MessageBody{Content: *ev.Content}
	case "":
		return p, invalidf("%s.type: is required", field)
	default:
		return p, invalidf("%s.type: unknown client event type %q", field, wire.Excerpt(ev.Type, maxQuoted))
	}
	raw, err := wire.EncodeBody(ev.Type, body)
	if err != nil {
		return p, err
	}
	p.Body = raw
	return p, nil
}

// answerKinds says which event an answer must reference and which answers already count.
// A user.tool_result does not count a confirmation as an answer: on self-hosted environments
// an ask-gated call is confirmed first and its worker then posts the result (API.md §8.3).
var answerKinds = map[string]struct {
	target  []string
	field   string
	answers []string
}{
	wire.EventUserToolConfirmation: {[]string{wire.EventAgentToolUse, wire.EventAgentMCPToolUse}, "tool_use_id", []string{wire.EventUserToolConfirmation, wire.EventUserToolResult}},
	wire.EventUserToolResult:       {[]string{wire.EventAgentToolUse}, "tool_use_id", []string{wire.EventUserToolResult}},
	wire.EventUserCustomToolResult: {[]string{wire.EventAgentCustomToolUse}, "custom_tool_use_id", []string{wire.EventUserCustomToolResult}},
}

// SendEvents validates every event, then appends them all in one transaction and returns the
// echoes in request order. Nothing is written if any event is rejected.
func (s *Service) SendEvents(ctx context.Context, workspaceID, sessionID string, raw []json.RawMessage) ([]wire.Event, error) {
	return s.SendEventsKeyed(ctx, workspaceID, sessionID, "", raw)
}

// SendEventsKeyed is SendEvents made idempotent on key (empty means not keyed): a retry with
// the same key and events returns the first send's answer — the same event ids — and appends
// nothing; the same key with other events is a KindKeyReused error. The key is looked up under
// the session's row lock, which also serialises concurrent sends, so two attempts never both
// append.
func (s *Service) SendEventsKeyed(ctx context.Context, workspaceID, sessionID, key string, raw []json.RawMessage) ([]wire.Event, error) {
	var hash string
	if key != "" {
		if err := checkIdempotencyKey(key); err != nil {
			return nil, err
		}
		var err error
		if hash, err = requestHash(raw); err != nil {
			return nil, err
		}
	}
	if len(raw) == 0 {
		return nil, invalidf("events: must have at least one event")
	}
	if len(raw) > maxEventsPerRequest {
		return nil, invalidf("events: at most %d events per request", maxEventsPerRequest)
	}
	decoded := make([]clientEvent, len(raw))
	for i, r := range raw {
		ev, err := decodeClientEvent(fmt.Sprintf("events[%d]", i), r)
		if err != nil {
			return nil, err
		}
		decoded[i] = ev
	}
	var out []wire.Event
	replayed := false
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		// The row lock and the environment in one round trip.
		sess, env, err := q.LockSessionWithEnvironment(ctx, workspaceID, sessionID)
		if err != nil {
			return notFoundAs(err, "session %s not found", sessionID)
		}
		// Before any state check: a retry answers as the first send did even if the session
		// has moved on (answered the tool call, been archived) since.
		if key != "" {
			if out, replayed, err = replaySend(ctx, q, sessionID, key, hash); err != nil || replayed {
				return err
			}
		}
		if sess.ArchivedAt != nil || sess.Status == wire.SessionStatusTerminated {
			return conflictf("session %s is %s; it accepts no new events", sessionID, terminalWord(sess))
		}
		envCfg, err := environmentConfig(env)
		if err != nil {
			return err
		}
		selfHosted := envCfg.Type == "self_hosted"
		if err := checkSystemMessages(decoded, sess.Agent, turnEnded(sess)); err != nil {
			return err
		}
		events := make([]store.NewEvent, len(decoded))
		answered := map[string]bool{}
		confirmed := map[string]bool{}
		for i, ev := range decoded {
			field := fmt.Sprintf("events[%d]", i)
			p, err := buildClientEvent(field, ev, selfHosted)
			if err != nil {
				return err
			}
			if p.ref != "" {
				if answered[p.ref] {
					return invalidf("%s: event %s is answered twice in this request", field, p.ref)
				}
				if err := checkAnswer(ctx, q, sessionID, field, p, turnEnded(sess)); err != nil {
					return err
				}
				answered[p.ref] = true
				confirmed[p.ref] = p.Type == wire.EventUserToolConfirmation
			}
			// An interrupt on a session with nothing running applies at once (a no-op).
			if p.Type == wire.EventUserInterrupt && sess.Status == wire.SessionStatusIdle {
				p.Processed = true
			}
			// A system.message goes into the log with the event it accompanies: queued with a
			// user.message, at once after a tool result (processed on receipt).
			if p.Type == wire.EventSystemMessage {
				p.Processed = events[i-1].Processed
			}
			events[i] = p.NewEvent
		}
		// A message to an idle session starts a turn, and an answer that completes what a
		// parked turn waits for resumes it: either makes the session run, so the workspace
		// quota decides, before anything is written.
		resumes := false
		if sess.Status == wire.SessionStatusIdle && s.limits.RunningSessions > 0 {
			if hasType(events, wire.EventUserMessage) {
				if err := s.admitTurn(ctx, q, workspaceID, sessionID, "the message would start another turn"); err != nil {
					return err
				}
			} else if resumes, err = resumesParkedTurn(ctx, q, sess, events, answered, confirmed); err != nil {
				return err
			} else if resumes {
				if err := s.admitTurn(ctx, q, workspaceID, sessionID, "the answer would resume this session's parked turn"); err != nil {
					return err
				}
			}
		}
		now := s.now()
		// Under the row lock the append's seqs are known: it goes out with the commit, and
		// a keyed send's stored answer can be written before it.
		w := q.Writes(sessionID, sess.LastSeq)
		out = w.Append(events, now)
		if resumes {
			// The answer commits processed and the session stays idle until a worker picks
			// it up: the mark makes concurrent admissions count it meanwhile.
			w.MarkResuming()
		}
		if key != "" {
			if err := recordSend(ctx, q, sessionID, key, hash, out, now); err != nil {
				return err
			}
		}
		if selfHosted && busy(sess.Status) && hasType(events, wire.EventUserInterrupt) {
			// The worker holding the session's work stops it after its next heartbeat
			// (docs/self-hosted-environments.md); the next call queues new work.
			if err := q.StopSessionWork(ctx, sessionID, false, now); err != nil {
				return err
			}
		}
		return w.FlushAtCommit(ctx)
	})
	if err != nil {
		return nil, err
	}
	if !replayed {
		s.wake(ctx, sessionID, hasQueuedInterrupt(out))
	}
	return out, nil
}

// resumesParkedTurn reports whether appending evs to the idle session sess resumes its parked
// turn, so the session runs again: the rule of agent.Next, read from the row's stop reason
// instead of the log. answered holds the calls evs answer, confirmed those among them answered
// by a user.tool_confirmation. A confirmation of a call the turn waits on resumes it at once
// (an allowed call runs, a denied one is answered with its rejection, even while other calls
// still wait); results resume it once every call it waits on has an answer, counting answers
// already stored (a partial answer the worker has not re-parked on yet). A partial answer
// does not resume it: the worker parks the turn again on what still waits, and the session
// stays idle. An interrupt in evs closes the turn instead.
func resumesParkedTurn(ctx context.Context, q *store.Queries, sess store.SessionRecord, evs []store.NewEvent, answered, confirmed map[string]bool) (bool, error) {
	if len(answered) == 0 || hasType(evs, wire.EventUserInterrupt) || len(sess.StopReason) == 0 || string(sess.StopReason) == "null" {
		return false, nil
	}
	var stop wire.StopReason
	if err := json.Unmarshal(sess.StopReason, &stop); err != nil {
		return false, fmt.Errorf("decode the stop reason of session %s: %w", sess.ID, err)
	}
	if stop.Type != wire.StopRequiresAction || len(stop.EventIDs) == 0 {
		return false, nil
	}
	var missing []string
	for _, id := range stop.EventIDs {
		if confirmed[id] {
			return true, nil
		}
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return true, nil
	}
	if len(missing) == len(stop.EventIDs) {
		return false, nil // evs answer none of the calls the turn waits on
	}
	stored, err := q.AnsweredCalls(ctx, sess.ID, missing)
	if err != nil {
		return false, err
	}
	return len(stored) == len(missing), nil
}

// replaySend returns the stored answer of an earlier send with key, if there is one.
func replaySend(ctx context.Context, q *store.Queries, sessionID, key, hash string) ([]wire.Event, bool, error) {
	prev, err := q.GetEventSend(ctx, sessionID, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if prev.RequestHash != hash {
		return nil, false, errKeyReused("events request to this session", key)
	}
	var stored []storedEcho
	if err := json.Unmarshal(prev.Response, &stored); err != nil {
		return nil, false, fmt.Errorf("decode the stored answer of send %q: %w", key, err)
	}
	out := make([]wire.Event, len(stored))
	for i, e := range stored {
		out[i] = wire.Event(e)
	}
	return out, true, nil
}

// storedEcho is an echo as a keyed send keeps it: every field of wire.Event, which has only a
// wire encoding (no decoder, and no seq or created_at in it).
type storedEcho struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	ProcessedAt *time.Time      `json:"processed_at"`
	Body        json.RawMessage `json:"body"`
	Seq         int64           `json:"seq"`
	CreatedAt   time.Time       `json:"created_at"`
	// Private is always empty: clients send no event with a private part.
	Private json.RawMessage `json:"private,omitempty"`
}

func recordSend(ctx context.Context, q *store.Queries, sessionID, key, hash string, out []wire.Event, now time.Time) error {
	stored := make([]storedEcho, len(out))
	for i, e := range out {
		stored[i] = storedEcho(e)
	}
	resp, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("encode the answer of send %q: %w", key, err)
	}
	return q.InsertEventSend(ctx, store.EventSend{SessionID: sessionID, Key: key, RequestHash: hash, Response: resp, CreatedAt: now})
}

func hasType(evs []store.NewEvent, typ string) bool {
	for _, ev := range evs {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

func hasQueuedInterrupt(evs []wire.Event) bool {
	for _, ev := range evs {
		if ev.Type == wire.EventUserInterrupt && ev.ProcessedAt == nil {
			return true
		}
	}
	return false
}

// checkAnswer rejects answers to unknown ids, to events of the wrong kind, and to events
// already answered, so nothing is half-applied. The one exception is API.md §17: a
// user.custom_tool_result re-sent once the session's turn has ended (turnOver) is accepted
// with a new id, as the hosted service does (no dedupe); the worker gives it a running → idle
// cycle of its own (turns.Decide) and the model never sees it (agent.Project keeps a call's
// first result). While the turn is still parked or running a second result is a duplicate of
// one the turn is about to use, and is refused.
func checkAnswer(ctx context.Context, q *store.Queries, sessionID, field string, p parsedEvent, turnOver bool) error {
	kind := answerKinds[p.Type]
	target, err := q.GetEvent(ctx, sessionID, p.ref)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return invalidf("%s.%s: no event %s in this session", field, kind.field, p.ref)
		}
		return err
	}
	okType := false
	for _, t := range kind.target {
		okType = okType || target.Type == t
	}
	if !okType {
		return invalidf("%s.%s: event %s is a %s, not something %s answers", field, kind.field, p.ref, target.Type, p.Type)
	}
	switch p.Type {
	case wire.EventUserToolConfirmation:
		perm, err := evaluatedPermission(target)
		if err != nil {
			return err
		}
		if perm != wire.PermissionResultAsk {
			return invalidf("%s.tool_use_id: event %s does not await confirmation", field, p.ref)
		}
	case wire.EventUserToolResult:
		if err := checkRunnable(ctx, q, sessionID, field, target); err != nil {
			return err
		}
	}
	if _, err := q.EventReferencing(ctx, sessionID, kind.answers, kind.field, p.ref); err == nil {
		if p.Type == wire.EventUserCustomToolResult {
			if turnOver {
				return nil
			}
			return invalidf("%s.%s: event %s was already answered and its turn is still open; a result re-sent after the session is idle again is accepted", field, kind.field, p.ref)
		}
		return invalidf("%s.%s: event %s was already answered", field, kind.field, p.ref)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// turnEnded reports whether the session's latest turn is over: it is idle with a stop reason
// other than requires_action (a parked turn is still open, and a session that never stopped a
// turn has none that ended). An answered call's turn is then over too: an answer is applied on
// receipt, and the turn it resumes runs (the session leaves requires_action) before it ends.
func turnEnded(sess store.SessionRecord) bool {
	if sess.Status != wire.SessionStatusIdle || len(sess.StopReason) == 0 || string(sess.StopReason) == "null" {
		return false
	}
	var stop wire.StopReason
	if err := json.Unmarshal(sess.StopReason, &stop); err != nil {
		return false // unreadable: refuse the re-send rather than guess
	}
	return stop.Type != wire.StopRequiresAction
}

func evaluatedPermission(toolUse wire.Event) (string, error) {
	tu, err := wire.DecodeBody[wire.ToolUseBody](toolUse)
	if err != nil {
		return "", err
	}
	return tu.EvaluatedPermission, nil
}

// checkRunnable refuses a worker's result for a call that must not have run: one its policy
// denied, or an ask-gated one without an allow, so a result cannot bypass the confirmation.
func checkRunnable(ctx context.Context, q *store.Queries, sessionID, field string, toolUse wire.Event) error {
	perm, err := evaluatedPermission(toolUse)
	if err != nil {
		return err
	}
	switch perm {
	case wire.PermissionResultDeny:
		return invalidf("%s.tool_use_id: event %s was denied by its permission policy and never runs", field, toolUse.ID)
	case wire.PermissionResultAsk:
		conf, err := q.EventReferencing(ctx, sessionID, []string{wire.EventUserToolConfirmation}, "tool_use_id", toolUse.ID)
		if errors.Is(err, store.ErrNotFound) {
			return invalidf("%s.tool_use_id: event %s awaits a user.tool_confirmation; send its result after an allow", field, toolUse.ID)
		}
		if err != nil {
			return err
		}
		c, err := wire.DecodeBody[wire.ToolConfirmationBody](conf)
		if err != nil {
			return err
		}
		if c.Result != wire.PermissionResultAllow {
			return invalidf("%s.tool_use_id: event %s was denied by %s and never runs", field, toolUse.ID, conf.ID)
		}
	}
	return nil
}

// environmentConfig reads an environment's stored config.
func environmentConfig(env store.EnvironmentRecord) (wire.EnvironmentConfig, error) {
	var c wire.EnvironmentConfig
	if err := json.Unmarshal(env.Config, &c); err != nil {
		return c, fmt.Errorf("decode environment %s config: %w", env.ID, err)
	}
	return c, nil
}

// StreamEvents hands one page of a session's log to sink event by event as it is read,
// for a caller that writes the page out without holding it (store.Queries.StreamEvents).
// The session is checked first, so a missing one is an error before anything reaches sink.
func (s *Service) StreamEvents(ctx context.Context, workspaceID, sessionID string, p EventListParams, sink func(wire.Event) (stop bool, err error)) (more bool, err error) {
	if _, err := s.store.GetSession(ctx, workspaceID, sessionID, false); err != nil {
		return false, notFoundAs(err, "session %s not found", sessionID)
	}
	return s.store.StreamEvents(ctx, sessionID, p, sink)
}

// accompaniable reports whether a system.message may follow an event of type typ.
func accompaniable(typ string) bool {
	return typ == wire.EventUserMessage || typ == wire.EventUserToolResult || typ == wire.EventUserCustomToolResult
}

// maxSystemMessageBlocks is the most text blocks a system.message may carry (API.md §5.2).
const maxSystemMessageBlocks = 1000

// checkSystemMessages applies the placement rules of system.message (API.md §5.2, the Managed
// Agents reference): at most one a request, the request's last event, right after the
// user.message, user.tool_result or user.custom_tool_result it accompanies; and only on a
// model that takes mid-conversation system messages (it becomes a role "system" message,
// platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages), else
// model_does_not_support_mid_conversation_system.
//
// After a turn has ended, a tool result is a re-send that changes nothing (API.md §17), so a
// system.message may not ride on one: it would land after the assistant's last answer, where
// the API refuses a system message.
func checkSystemMessages(events []clientEvent, agentRaw json.RawMessage, ended bool) error {
	for i, ev := range events {
		if ev.Type != wire.EventSystemMessage {
			continue
		}
		field := fmt.Sprintf("events[%d]", i)
		var agent wire.SessionAgent
		if err := json.Unmarshal(agentRaw, &agent); err != nil {
			return fmt.Errorf("decode the session's agent: %w", err)
		}
		if !catalog.Builtin().Resolve(agent.Model.ID).MidConversationSystem {
			return invalidf("%s.type: system.message is not supported by the model %s", field, wire.Excerpt(agent.Model.ID, maxQuoted)).
				withCode("model_does_not_support_mid_conversation_system")
		}
		if i != len(events)-1 {
			return invalidf("%s: a system.message must be the last event of its request", field)
		}
		if i == 0 || !accompaniable(events[i-1].Type) {
			return invalidf("%s: a system.message must come right after the user.message, user.tool_result or user.custom_tool_result it accompanies, in the same request", field)
		}
		if ended && events[i-1].Type != wire.EventUserMessage {
			return invalidf("%s: a system.message can come with a tool result only while the turn waits for it; send it with a user.message", field)
		}
	}
	return nil
}
