package workqueue

import (
	"context"
	"sync"
)

// Arrivals wakes the long polls of an environment when an item is queued on it. It is the
// handler of store.TopicWork, which the queueing transaction notifies, so a poll on any API
// process hears of an item queued by any worker. A notification lost while the listener
// reconnects costs only the rest of one poll's block (under a second): Connected wakes every
// poll so each looks again.
type Arrivals struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
}

// NewArrivals makes an Arrivals with no watchers.
func NewArrivals() *Arrivals {
	return &Arrivals{watchers: map[string]map[chan struct{}]struct{}{}}
}

// Watch returns a channel closed when an item is next queued on the environment, and the
// function that stops watching.
func (a *Arrivals) Watch(environmentID string) (arrived <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	set := a.watchers[environmentID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		a.watchers[environmentID] = set
	}
	set[ch] = struct{}{}
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if set, ok := a.watchers[environmentID]; ok {
			delete(set, ch)
			if len(set) == 0 {
				delete(a.watchers, environmentID)
			}
		}
	}
}

// Connected wakes every poll: what was queued while the topic was not listened to is not
// announced.
func (a *Arrivals) Connected(context.Context) {
	a.mu.Lock()
	all := a.watchers
	a.watchers = map[string]map[chan struct{}]struct{}{}
	a.mu.Unlock()
	for _, set := range all {
		for ch := range set {
			close(ch)
		}
	}
}

// Notify wakes the polls of the environment the payload names.
func (a *Arrivals) Notify(_ context.Context, environmentID string) {
	a.mu.Lock()
	set := a.watchers[environmentID]
	delete(a.watchers, environmentID)
	a.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}
