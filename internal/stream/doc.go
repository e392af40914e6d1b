// Package stream fans stream-only preview frames (API.md §5.4: event_start, event_delta)
// out from the worker that runs the model to the API processes that hold SSE connections,
// and decides per connection which of them to write.
//
// Previews are never persisted and delivery is best-effort: a subscriber that falls behind
// loses frames rather than slowing the publisher, and a connection that misses one frame of
// a preview stops that preview (PreviewFilter) so a client never shows text with a hole. The
// committed event that follows is authoritative. Committed-event wake-ups are not here: they
// belong to store.Notifier and the log.
//
// Two hubs implement Hub: MemoryHub for one process (dev, tests) and PostgresHub, which
// carries frames across processes with NOTIFY on PreviewsChannel (store.TopicPreviews),
// received through the process's store.Listener.
//
// A publisher ends every preview (Preview.End) before it commits the event: previews and
// committed events reach an API process on separate paths, so the connection holds a committed
// event it asked previews of until that end arrived (PreviewFilter.Await, bounded by the
// handler), and writes event_start, the deltas, then the committed event.
//
// An SSE handler of a session stream uses it like this (errors, heartbeats and the bound on
// the wait left out):
//
//	var previews <-chan stream.Frame // nil: never ready
//	if len(eventDeltas) > 0 {
//		ch, unsubscribe := hub.Subscribe(sessionID) // before the log's end is read
//		defer unsubscribe()
//		previews = ch
//	}
//	filter := stream.NewPreviewFilter(eventDeltas, cursor, logEnd)
//	var pending []wire.Event
//	for {
//		if len(pending) == 0 {
//			pending = nextCommittedEvents()
//		}
//		for len(pending) > 0 && !filter.Await(pending[0]) {
//			write(pending[0].Type, pending[0])
//			for _, f := range filter.Committed(pending[0]) {
//				write(f.Type, f)
//			}
//			pending = pending[1:]
//		}
//		select {
//		case f := <-previews:
//			if filter.Admit(f) {
//				write(f.Type, f) // no `id:` line
//			}
//		case <-wakeUnlessPending:
//		}
//	}
//
// It imports wire, pgx and store (for the Listener and the topic names); never sessions,
// httpapi, durable or agent.
package stream
