package durable

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// previewSink publishes a model turn's previews to the stream hub. It learns the model
// request's span.model_request_start from the events the turn commits (or from the history,
// when a crashed attempt's start is reused), so API processes can order previews after it.
type previewSink struct {
	ctx    context.Context
	hub    stream.Hub
	logger *slog.Logger

	mu       sync.Mutex
	src      stream.Source
	previews map[string]*stream.Preview
}

func newPreviewSink(ctx context.Context, hub stream.Hub, logger *slog.Logger, sessionID string, history []wire.Event) *previewSink {
	p := &previewSink{ctx: ctx, hub: hub, logger: logger, src: stream.Source{SessionID: sessionID}, previews: map[string]*stream.Preview{}}
	if start, ok := openRequestStart(history); ok {
		p.src.RequestStartID, p.src.RequestStartSeq = start.ID, start.Seq
	}
	return p
}

// openRequestStart finds a span.model_request_start that has no end yet.
func openRequestStart(history []wire.Event) (wire.Event, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		switch history[i].Type {
		case wire.EventSpanModelRequestEnd:
			return wire.Event{}, false
		case wire.EventSpanModelRequestStart:
			return history[i], true
		}
	}
	return wire.Event{}, false
}

// observe records the request start when the turn commits it.
func (p *previewSink) observe(evs []wire.Event) {
	for _, ev := range evs {
		if ev.Type == wire.EventSpanModelRequestStart {
			p.mu.Lock()
			p.src.RequestStartID, p.src.RequestStartSeq = ev.ID, ev.Seq
			p.mu.Unlock()
		}
	}
}

// Start implements agent.PreviewSink.
func (p *previewSink) Start(eventID, eventType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pv, err := stream.StartPreview(p.ctx, p.hub, p.src, eventType, eventID)
	p.previews[eventID] = pv
	if err != nil {
		p.logger.DebugContext(p.ctx, "preview start dropped", "event_id", eventID, "error", err)
	}
}

// Delta implements agent.PreviewSink.
func (p *previewSink) Delta(eventID string, index int, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pv := p.previews[eventID]; pv != nil {
		if err := pv.Delta(p.ctx, index, text); err != nil {
			p.logger.DebugContext(p.ctx, "preview delta dropped", "event_id", eventID, "error", err)
		}
	}
}

// endAll publishes the end of every preview started so far. It runs right before the model
// request's end is committed, with the response's events in the same commit: every frame of a
// preview is published before its event is in the log, so an SSE connection can wait for the
// end and write the preview first (stream.PreviewFilter.Await). A preview of text that ends up
// empty has no event; its end just stops it.
func (p *previewSink) endAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, pv := range p.previews {
		if err := pv.End(p.ctx); err != nil {
			p.logger.DebugContext(p.ctx, "preview end dropped", "event_id", id, "error", err)
		}
		delete(p.previews, id)
	}
}

// observingEmitter passes committed events to the preview sink, and tells it when a model
// request's events are about to be committed.
type observingEmitter struct {
	next agent.Emitter
	sink *previewSink
}

func (o observingEmitter) Emit(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	if slices.ContainsFunc(evs, func(ev agent.NewEvent) bool { return ev.Type == wire.EventSpanModelRequestEnd }) {
		o.sink.endAll()
	}
	out, err := o.next.Emit(ctx, evs)
	if err == nil {
		o.sink.observe(out)
	}
	return out, err
}
