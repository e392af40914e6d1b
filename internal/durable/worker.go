package durable

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/managed-agents/managed-agents/internal/tracing"
)

// DefaultStopTimeout is how long a stopping worker lets running steps finish when
// WorkerOptions.StopTimeout is zero: within Kubernetes' default grace period of 30 s, and
// long enough for a typical command or model call.
const DefaultStopTimeout = 25 * time.Second

// WorkerOptions configures NewWorker.
type WorkerOptions struct {
	// TaskQueue of session workflows; TaskQueue when empty.
	TaskQueue string
	// StopTimeout is how long Stop waits for running activities before it cancels their
	// contexts (DefaultStopTimeout when zero). A step that finishes in time records its real
	// result; one cut at the deadline is retried as after a crash (a bash call then reports
	// that it was interrupted and is not run again).
	StopTimeout time.Duration
	// Observer records every activity attempt (metrics); nil records nothing.
	Observer Observer
}

// NewWorker returns a worker for session workflows and their activities.
func NewWorker(c client.Client, opts WorkerOptions, acts *Activities) worker.Worker {
	taskQueue := opts.TaskQueue
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	stopTimeout := opts.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	var interceptors []interceptor.WorkerInterceptor
	if tracing.Enabled(acts.Tracer) {
		// Carries each turn's trace from the workflow to its steps (trace.go); headers only,
		// so workers with and without it replay each other's histories.
		interceptors = append(interceptors, &traceInterceptor{tracer: tracing.Tracer(acts.Tracer)})
	}
	if opts.Observer != nil {
		interceptors = append(interceptors, &activityObserver{obs: opts.Observer})
	}
	w := worker.New(c, taskQueue, worker.Options{
		Interceptors: interceptors,
		// Without it the SDK cancels every running activity the moment Stop is called: a
		// SIGTERM then cut the running command, which a crash (SIGKILL) did not.
		WorkerStopTimeout: stopTimeout,
		// Heartbeats are how interrupts reach a running step: flush them often.
		DefaultHeartbeatThrottleInterval: 200 * time.Millisecond,
		MaxHeartbeatThrottleInterval:     500 * time.Millisecond,
		// A task queue has four partitions by default and a task waits in the one it was
		// written to: with the SDK's two pollers per kind, it sat there for seconds whenever no
		// poll was parked on that partition (p99 of a step ~2 s). Eight cover them all.
		MaxConcurrentActivityTaskPollers: 8,
		MaxConcurrentWorkflowTaskPollers: 8,
	})
	w.RegisterWorkflow(SessionWorkflow)
	w.RegisterWorkflow(TeardownWorkflow)
	w.RegisterActivity(acts)
	return w
}
