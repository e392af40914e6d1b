package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Runtime runs turns in memory: it loops Next and the Core's steps until the turn ends or
// parks. A durable caller runs the same steps one by one instead.
type Runtime struct {
	core *Core
}

// NewRuntime returns a runtime driving core.
func NewRuntime(core *Core) *Runtime { return &Runtime{core: core} }

// Outcome is how a Run stopped.
type Outcome struct {
	// StopReason is end_turn, requires_action or retries_exhausted.
	StopReason string
	// EventIDs are the calls waiting for a client, with requires_action.
	EventIDs []string
	// Usage sums the model usage of the turn, read from the log (so it includes requests made
	// before a park and by earlier attempts).
	Usage model.Usage
}

// Run advances the session's current turn as far as it can: it calls the model, runs allowed
// tools, answers denied ones, and stops when the turn ends (end_turn, or retries_exhausted at
// the round cap) or parks (requires_action). The trigger — a user message, confirmations,
// custom tool results, an interrupt — is whatever in.History holds; with nothing to do it
// returns the latest turn's stop reason without emitting anything. Errors (a model error, a
// log or sandbox failure, ctx cancelled) stop the run; what was committed stays, and a later
// Run continues from it.
func (r *Runtime) Run(ctx context.Context, in Input) (Outcome, error) {
	if in.Emitter == nil {
		return Outcome{}, errors.New("runtime: Input.Emitter is required")
	}
	rec := &recorder{next: in.Emitter, history: slices.Clone(in.History)}
	in.Emitter = rec
	for {
		in.History = rec.history
		step, err := Next(in.turn())
		if err != nil {
			return Outcome{}, err
		}
		if step.Kind == StepEnd || step.Kind == StepPark {
			return r.outcome(step, in.History)
		}
		before := len(rec.history)
		if err := r.do(ctx, in, rec, step); err != nil {
			return Outcome{}, err
		}
		if len(rec.history) == before {
			// Every step that is due emits something; a step that does not would loop forever.
			return Outcome{}, fmt.Errorf("runtime: step %s made no progress", step.Kind)
		}
	}
}

func (r *Runtime) do(ctx context.Context, in Input, rec *recorder, step Step) error {
	switch step.Kind {
	case StepModel:
		_, err := r.core.ModelTurn(ctx, in)
		return err
	case StepExecute:
		for _, call := range step.Calls {
			in.History = rec.history
			if err := r.core.ExecuteTool(ctx, in, call.Event); err != nil {
				return err
			}
		}
		return nil
	case StepReject:
		return r.core.RejectTools(ctx, in)
	case StepCap:
		return r.core.StopAtCap(ctx, in)
	}
	return fmt.Errorf("runtime: unexpected step %s", step.Kind)
}

func (r *Runtime) outcome(step Step, history []wire.Event) (Outcome, error) {
	usage, err := TurnUsage(history)
	if err != nil {
		return Outcome{}, err
	}
	if step.Kind == StepPark {
		return Outcome{StopReason: StopRequiresAction, EventIDs: step.EventIDs, Usage: usage}, nil
	}
	return Outcome{StopReason: step.StopReason, Usage: usage}, nil
}
