package durable

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// NewWorker returns a worker for session workflows and their activities on taskQueue
// (TaskQueue when empty).
func NewWorker(c client.Client, taskQueue string, acts *Activities) worker.Worker {
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	w := worker.New(c, taskQueue, worker.Options{
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
