package model

import (
	"context"
	"errors"
	"time"
)

// Observer records model requests (metrics). errKind is "" for a success, an ErrorKind for
// a model error, "canceled" when the caller gave up (an interrupt, a worker stopping) and
// "other" for anything else.
type Observer interface {
	ModelRequest(d time.Duration, errKind string)
}

// Error kinds an Observer sees besides the ErrorKinds.
const (
	ErrKindCanceled = "canceled"
	ErrKindOther    = "other"
)

// Observed returns c recording every request's latency and error kind through o.
func Observed(c Client, o Observer) Client { return observed{next: c, obs: o} }

type observed struct {
	next Client
	obs  Observer
}

func (c observed) Create(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	resp, err := c.next.Create(ctx, req)
	c.obs.ModelRequest(time.Since(start), errKind(ctx, err))
	return resp, err
}

func (c observed) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	start := time.Now()
	resp, err := c.next.Stream(ctx, req, onDelta)
	c.obs.ModelRequest(time.Since(start), errKind(ctx, err))
	return resp, err
}

func errKind(ctx context.Context, err error) string {
	var me *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &me):
		return string(me.Kind)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return ErrKindCanceled
	}
	return ErrKindOther
}
