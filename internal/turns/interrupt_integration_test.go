//go:build integration

package turns

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// blockingModel answers no request: a call waits until its context is cancelled, as a model
// call an interrupt cuts off does.
type blockingModel struct{ called chan struct{} }

func (m blockingModel) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return m.Stream(ctx, req, nil)
}

func (m blockingModel) Stream(ctx context.Context, _ model.Request, _ func(model.Delta)) (model.Response, error) {
	close(m.called)
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

// interrupt queues a user.interrupt as a client would.
func (e engine) interrupt(t testing.TB) {
	t.Helper()
	require.NoError(t, e.st.InTx(context.Background(), func(q *store.Queries) error {
		_, err := q.AppendEvents(context.Background(), e.session, []store.NewEvent{{Type: wire.EventUserInterrupt, Body: wire.EmptyBody}}, time.Now())
		return err
	}))
}

// TestInterruptClosesTheModelRequestItCutsOff: an interrupt during a model request leaves a
// log that reads span start, failed span end, user.interrupt, the turn's end, whichever of
// the step and the Advance that delivers the interrupt comes first. The step is the agent's
// (agent.Core.ModelTurn through the worker's emitter), with a model call that runs until it is
// cancelled.
//
// "advance first" is the race TestTurnInterrupt (e2e) lost now and then: when the workflow's
// own cancellation stops a model step running as a local activity, Temporal resolves the
// activity at once, without waiting for its function to return, so the workflow's Advance
// delivers the interrupt and finishes the turn while the step has yet to write the failed
// request's end (agent.Core.failRequest). That end came after session.status_idle.
func TestInterruptClosesTheModelRequestItCutsOff(t *testing.T) {
	t.Parallel()
	for _, advanceFirst := range []bool{true, false} {
		name := "step first"
		if advanceFirst {
			name = "advance first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEngine(t)
			e.open(t)
			turn, err := e.svc.LoadConversation(ctx, e.session)
			require.NoError(t, err)

			m := blockingModel{called: make(chan struct{})}
			core := agent.NewCore(m, agent.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			stepCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			stepErr := make(chan error, 1)
			go func() {
				_, err := core.ModelTurn(stepCtx, agent.Input{
					Agent: turn.Agent, History: turn.History, TurnStart: turn.TurnStartSeq,
					Conversation: turn.Conversation, Projection: turn.Projection,
					Emitter: e.svc.Emitter(e.session), HoldResponse: true,
				})
				stepErr <- err
			}()
			<-m.called // the request's start is in the log, and the model is being called
			e.interrupt(t)

			stepEnds := func() {
				t.Helper()
				cancel()
				require.ErrorIs(t, <-stepErr, context.Canceled)
			}
			if !advanceFirst {
				stepEnds()
			}
			closed, err := e.svc.Advance(ctx, e.session)
			require.NoError(t, err)
			require.Equal(t, agent.StepEnd, closed.Step.Kind)
			if advanceFirst {
				stepEnds()
			}

			log, err := e.st.History(ctx, e.session)
			require.NoError(t, err)
			start := lastOfType(t, log, wire.EventSpanModelRequestStart)
			var types []string
			for _, ev := range log {
				if ev.Seq >= start.Seq {
					types = append(types, ev.Type)
				}
			}
			require.Equal(t, []string{wire.EventSpanModelRequestStart, wire.EventSpanModelRequestEnd, wire.EventUserInterrupt,
				wire.EventSessionThreadStatusIdle, wire.EventSessionUsage, wire.EventSessionStatusIdle}, types)
			end, err := wire.DecodeBody[wire.SpanModelRequestEndBody](lastOfType(t, log, wire.EventSpanModelRequestEnd))
			require.NoError(t, err)
			require.Equal(t, wire.SpanModelRequestEndBody{ModelRequestStartID: start.ID, IsError: true}, end)
			idle, err := wire.DecodeBody[wire.StatusIdleBody](lastOfType(t, log, wire.EventSessionStatusIdle))
			require.NoError(t, err)
			require.Equal(t, wire.StopEndTurn, idle.StopReason.Type)

			// A response the step commits just too late (AdvanceAppending) is dropped too:
			// its request was closed.
			_, committed, err := e.svc.AdvanceAppending(ctx, e.session, response(t, start.ID))
			require.NoError(t, err)
			require.Empty(t, committed)
			after, err := e.st.History(ctx, e.session)
			require.NoError(t, err)
			require.Equal(t, positions(log), positions(after), "nothing of the late response was written")

			// The next turn calls the model afresh: the old request is not reused.
			next := e.open(t)
			require.Empty(t, next.Step.RequestStartID)
		})
	}
}

// TestLateRequestEndOfAFinishedTurnIsDropped: a failed request's end that comes after its
// turn ended and the next one opened (its start is no longer in the turn) is dropped, and a
// request opened and closed in one batch is appended as before.
func TestLateRequestEndOfAFinishedTurnIsDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEngine(t)
	first := e.turn(t, 3, 0)
	start := lastOfType(t, first.History, wire.EventSpanModelRequestStart)
	e.open(t)
	before, err := e.st.History(ctx, e.session)
	require.NoError(t, err)

	end, err := wire.EncodeBody(wire.EventSpanModelRequestEnd, wire.SpanModelRequestEndBody{ModelRequestStartID: start.ID, IsError: true})
	require.NoError(t, err)
	out, err := e.svc.Emitter(e.session).Emit(ctx, []agent.NewEvent{{ID: ids.New(ids.Event), Type: wire.EventSpanModelRequestEnd, Body: end}})
	require.NoError(t, err)
	require.Empty(t, out)
	after, err := e.st.History(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, positions(before), positions(after))

	e.respond(t, 1, 0) // start and end in one batch
	closed, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, agent.StepEnd, closed.Step.Kind)
}
