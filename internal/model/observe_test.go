package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
)

type stubClient struct{ err error }

func (s stubClient) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return model.Response{}, s.err
}

func (s stubClient) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	return model.Response{}, s.err
}

type kinds []string

func (k *kinds) ModelRequest(d time.Duration, errKind string) { *k = append(*k, errKind) }

func TestObservedRecordsErrorKinds(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"success", context.Background(), nil, ""},
		{"model error", context.Background(), fmt.Errorf("wrapped: %w", &model.Error{Kind: model.ErrOverloaded, Status: 529}), "overloaded"},
		{"cancelled", cancelled, errors.New("stream: context canceled"), model.ErrKindCanceled},
		{"other", context.Background(), errors.New("boom"), model.ErrKindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got kinds
			c := model.Observed(stubClient{err: tt.err}, &got)
			_, err := c.Stream(tt.ctx, model.Request{}, func(model.Delta) {})
			require.ErrorIs(t, err, tt.err, "the error passes through unchanged")
			_, _ = c.Create(tt.ctx, model.Request{})
			require.Equal(t, kinds{tt.want, tt.want}, got)
		})
	}
}
