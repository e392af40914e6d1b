package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// maxEventsLimit: the SDK's tool runner lists history with limit=1000 (API.md §10).
const maxEventsLimit = 1000

type sendEventsBody struct {
	Events []json.RawMessage `json:"events"`
}

func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request) error {
	var body sendEventsBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	evs, err := s.svc.SendEventsKeyed(r.Context(), workspace(r.Context()), r.PathValue("id"), key, body.Events)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Page[wire.Event]{Data: evs})
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	order, err := q.order("asc")
	if err != nil {
		return err
	}
	p := sessions.EventListParams{Desc: order == "desc"}
	if p.Limit, err = q.limit(maxEventsLimit, maxEventsLimit); err != nil {
		return err
	}
	for _, t := range q.list("types") {
		if !slices.Contains(wire.EventTypes, t) {
			return badRequest("types: unknown event type " + strconv.Quote(t))
		}
		p.Types = append(p.Types, t)
	}
	if p.ProcessedGT, p.ProcessedGTE, p.ProcessedLT, p.ProcessedLTE, err = q.createdRange(); err != nil {
		return err
	}
	c, err := q.pageCursor("events", order)
	if err != nil {
		return err
	}
	if c != nil {
		p.AfterSeq = c.Seq
	}
	evs, more, err := s.svc.ListEvents(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	page := wire.Page[wire.Event]{Data: evs}
	if page.Data == nil {
		page.Data = []wire.Event{}
	}
	if more && len(evs) > 0 {
		page.NextPage = cursor{Kind: "events", Order: order, Seq: evs[len(evs)-1].Seq}.encode()
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
