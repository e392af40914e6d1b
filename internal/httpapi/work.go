package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
	"github.com/managed-agents/managed-agents/internal/workqueue"
)

// The work queue of self-hosted environments (API.md §2.3), served by package workqueue.

func (s *Server) pollWork(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	opts := workqueue.PollOptions{WorkerID: r.Header.Get("Anthropic-Worker-ID")}
	if v := q.v.Get("block_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 1 || ms > 999 {
			return badRequest("block_ms: must be an integer between 1 and 999")
		}
		opts.Block = time.Duration(ms) * time.Millisecond
	}
	if v := q.v.Get("reclaim_older_than_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > int64(24*time.Hour/time.Millisecond) {
			return badRequest("reclaim_older_than_ms: must be an integer between 0 and 86400000")
		}
		d := time.Duration(ms) * time.Millisecond
		opts.ReclaimOlderThan = &d
	}
	work, err := s.work.Poll(r.Context(), principalOf(r.Context()), r.PathValue("id"), opts)
	if err != nil {
		return err
	}
	// An empty queue is a JSON null: the SDK's pollers read it as "no work" (API.md §2.3).
	writeJSON(w, http.StatusOK, work)
	return nil
}

func (s *Server) ackWork(w http.ResponseWriter, r *http.Request) error {
	work, err := s.work.Ack(r.Context(), principalOf(r.Context()), r.PathValue("id"), r.PathValue("work_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, work)
	return nil
}

func (s *Server) heartbeatWork(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	var opts workqueue.HeartbeatOptions
	if q.v.Has("expected_last_heartbeat") {
		v := q.v.Get("expected_last_heartbeat")
		opts.Expected = &v
	}
	if v := q.v.Get("desired_ttl_seconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 1 || secs > 86400 {
			return badRequest("desired_ttl_seconds: must be an integer between 1 and 86400")
		}
		opts.DesiredTTL = time.Duration(secs) * time.Second
	}
	hb, err := s.work.Heartbeat(r.Context(), principalOf(r.Context()), r.PathValue("id"), r.PathValue("work_id"), opts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hb)
	return nil
}

func (s *Server) stopWork(w http.ResponseWriter, r *http.Request) error {
	var p wire.WorkStopParams
	if r.ContentLength != 0 {
		if err := decodeBody(r, &p); err != nil {
			return err
		}
	}
	if err := s.work.Stop(r.Context(), principalOf(r.Context()), r.PathValue("id"), r.PathValue("work_id"), p.Force != nil && *p.Force); err != nil {
		return err
	}
	// The hosted service answers 204 with no body (API.md §2.3); the SDK's workers expect it.
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getWork(w http.ResponseWriter, r *http.Request) error {
	work, err := s.work.Get(r.Context(), principalOf(r.Context()), r.PathValue("id"), r.PathValue("work_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, work)
	return nil
}

func (s *Server) updateWork(w http.ResponseWriter, r *http.Request) error {
	var p wire.WorkUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	work, err := s.work.UpdateMetadata(r.Context(), principalOf(r.Context()), r.PathValue("id"), r.PathValue("work_id"), p.Metadata)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, work)
	return nil
}

func (s *Server) listWork(w http.ResponseWriter, r *http.Request) error {
	p, err := newQuery(r.URL).listParams("work", "desc", 20, 100, false)
	if err != nil {
		return err
	}
	items, more, err := s.work.List(r.Context(), principalOf(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keysetPage("work", items, more, p, workKey, false))
	return nil
}

func workKey(w wire.Work) (time.Time, string) { return time.Time(w.CreatedAt), w.ID }

func (s *Server) workStats(w http.ResponseWriter, r *http.Request) error {
	st, err := s.work.Stats(r.Context(), principalOf(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// workUnavailable answers the queue's routes on a server built without a queue (tests that
// build the API alone).
func workUnavailable(http.ResponseWriter, *http.Request) error {
	return &sessions.Error{Kind: sessions.KindInvalid, Message: "this server has no work queue configured"}
}
