package controllers

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// SessionEvents turns the database's committed-event wake-ups into reconciles of the
// Session resources whose sessions they name, so a Session's status follows its session as
// events are committed rather than by polling. It is a handler of the events topic
// (store.Listener.Listen(store.TopicEvents, ...) in internal/app: Connected and Notify) and a
// controller-runtime source (Source).
//
// The Session reconciler tells it which resource a session belongs to (track) once it knows
// the session id; a wake-up for a session no resource owns is dropped. After a LISTEN
// reconnect, notifications may have been lost, so every tracked Session is reconciled.
type SessionEvents struct {
	mu   sync.Mutex
	byID map[string]types.NamespacedName
	ch   chan event.GenericEvent
}

// NewSessionEvents returns a source with nothing tracked.
func NewSessionEvents() *SessionEvents {
	return &SessionEvents{byID: map[string]types.NamespacedName{}, ch: make(chan event.GenericEvent, 256)}
}

// Source is the controller-runtime source of the wake-ups (source.Channel).
func (e *SessionEvents) Source() source.Source {
	return source.Channel[client.Object](e.ch, &handler.EnqueueRequestForObject{})
}

// Connected reconciles every tracked Session: what was committed while the topic was not
// listened to is not notified again.
func (e *SessionEvents) Connected(ctx context.Context) {
	e.mu.Lock()
	names := make([]types.NamespacedName, 0, len(e.byID))
	for _, nn := range e.byID {
		names = append(names, nn)
	}
	e.mu.Unlock()
	for _, nn := range names {
		e.send(ctx, nn)
	}
}

// Notify reconciles the Session of the session a wake-up (its id; "<id>:<seq>" from older
// processes) names.
func (e *SessionEvents) Notify(ctx context.Context, payload string) {
	id, _, _ := strings.Cut(payload, ":")
	e.mu.Lock()
	nn, ok := e.byID[id]
	e.mu.Unlock()
	if ok {
		e.send(ctx, nn)
	}
}

// send blocks while the source's buffer is full: the listener connection is the
// controller's own, so holding it back only delays wake-ups, and the queue coalesces them.
func (e *SessionEvents) send(ctx context.Context, nn types.NamespacedName) {
	obj := &v1alpha1.Session{}
	obj.Name, obj.Namespace = nn.Name, nn.Namespace
	select {
	case e.ch <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

func (e *SessionEvents) track(sessionID string, nn types.NamespacedName) {
	e.mu.Lock()
	e.byID[sessionID] = nn
	e.mu.Unlock()
}

func (e *SessionEvents) forget(sessionID string) {
	e.mu.Lock()
	delete(e.byID, sessionID)
	e.mu.Unlock()
}
