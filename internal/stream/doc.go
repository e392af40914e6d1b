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
// An SSE handler of a session stream uses it like this (errors and heartbeats left out):
//
//	filter := stream.NewPreviewFilter(eventDeltas, cursor)
//	var previews <-chan stream.Frame // nil: never ready
//	if filter.Enabled() {
//		ch, unsubscribe := hub.Subscribe(sessionID)
//		defer unsubscribe()
//		previews = ch
//	}
//	for {
//		select {
//		case f := <-previews:
//			if filter.Admit(f) {
//				write(f.Type, f) // no `id:` line
//			}
//		case <-wake:
//			for _, ev := range nextCommittedEvents() {
//				write(ev.Type, ev)
//				for _, f := range filter.Committed(ev) {
//					write(f.Type, f)
//				}
//			}
//		}
//	}
//
// It imports wire, pgx and store (for the Listener and the topic names); never sessions,
// httpapi, durable or agent.
package stream
