// Package startstop is the shape of a process's background parts (river's startstop): a
// service starts with Start and ends with Stop, and both may be called more than once, from
// any goroutine, in any order. A role stops its parts in a deferred Stop and again on an
// error path without keeping track of what it already stopped.
package startstop

import (
	"context"
	"sync"
)

// Service is a background part of a process.
type Service interface {
	// Start launches the service and returns once it runs; starting a running service does
	// nothing. ctx carries values only: the service runs until Stop.
	Start(ctx context.Context) error
	// Stop ends the service and waits until its goroutines have returned. Stopping a stopped
	// or never started service does nothing.
	Stop()
}

// Loop runs one function in a goroutine between Start and Stop; embed it or keep it in a
// field to make a type a Service whose work is one loop.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run(ctx) in a goroutine unless it already runs; ctx ends at Stop.
func (l *Loop) Start(ctx context.Context, run func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Stop cancels the loop's context and waits for run to return. Concurrent and repeated
// Stops all wait for the same run; a Stop before Start returns at once.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// Group is services started in order and stopped in reverse order.
type Group []Service

// Start starts each service; if one fails, it stops those already started and returns the
// error.
func (g Group) Start(ctx context.Context) error {
	for i, s := range g {
		if err := s.Start(ctx); err != nil {
			g[:i].Stop()
			return err
		}
	}
	return nil
}

// Stop stops every service, the last started first.
func (g Group) Stop() {
	for i := len(g) - 1; i >= 0; i-- {
		g[i].Stop()
	}
}
