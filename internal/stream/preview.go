package stream

import (
	"context"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Preview publishes the frames of one previewed event in order and numbers them
// (Frame.Seq), so that a connection that lost one stops the preview instead of showing text
// with a hole. It is not safe for concurrent use; one model stream drives it.
type Preview struct {
	hub   Hub
	start Frame
	seq   int   // Seq of the last frame published
	err   error // the first failure; the rest of the preview would be useless to every filter
}

// StartPreview publishes the event_start of an agent.message or agent.thinking event that
// src's model request is producing; eventID is the id the committed event will carry. The
// returned Preview is never nil; after an error it publishes nothing more.
func StartPreview(ctx context.Context, hub Hub, src Source, eventType, eventID string) (*Preview, error) {
	p := &Preview{hub: hub, start: Frame{Source: src, Type: FrameEventStart, EventID: eventID, EventType: eventType}}
	if err := p.send(ctx, p.start); err != nil {
		return p, fmt.Errorf("start preview of %s %s: %w", eventType, eventID, err)
	}
	return p, nil
}

// Delta publishes text to append to content block index of the previewed agent.message
// (API.md §5.4: a new index starts a new block). agent.thinking previews are start-only.
// Errors are for logging; a failed preview ends without affecting the committed event.
func (p *Preview) Delta(ctx context.Context, index int, text string) error {
	if p.start.EventType != wire.EventAgentMessage {
		return fmt.Errorf("%w: %s previews are start-only", ErrInvalidFrame, p.start.EventType)
	}
	if p.err != nil {
		return fmt.Errorf("preview of %s stopped: %w", p.start.EventID, p.err)
	}
	p.seq++
	f := p.start
	f.Type, f.EventType, f.Index, f.Text, f.Seq = FrameEventDelta, "", index, text, p.seq
	if err := p.send(ctx, f); err != nil {
		return fmt.Errorf("preview delta of %s: %w", f.EventID, err)
	}
	return nil
}

// End publishes the preview's end: the publisher has sent every frame of it and is about to
// commit the event (or, for a preview of nothing, its model request's end). A connection
// waits for it before writing the committed event, so the event never overtakes its preview
// (PreviewFilter.Await). It is sent even after a failed frame: a connection sees the hole in
// the numbering, stops the preview and stops waiting for it. Errors are for logging, like
// Delta's.
func (p *Preview) End(ctx context.Context) error {
	p.seq++
	f := p.start
	f.Type, f.EventType, f.Seq = FrameEventEnd, "", p.seq
	if err := p.send(ctx, f); err != nil {
		return fmt.Errorf("preview end of %s: %w", f.EventID, err)
	}
	return nil
}

func (p *Preview) send(ctx context.Context, f Frame) error {
	if err := p.hub.Publish(ctx, f); err != nil {
		p.err = err
		return err
	}
	return nil
}
