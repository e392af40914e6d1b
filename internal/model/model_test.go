package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
)

func TestAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ctx  context.Context
		want int
	}{
		{name: "unset is the first try", ctx: context.Background(), want: 1},
		{name: "set", ctx: model.WithAttempt(context.Background(), 3), want: 3},
		{name: "nonsense counts as the first try", ctx: model.WithAttempt(context.Background(), 0), want: 1},
		{name: "the latest wins", ctx: model.WithAttempt(model.WithAttempt(context.Background(), 2), 5), want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, model.Attempt(tt.ctx))
		})
	}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{err: &model.Error{Kind: model.ErrOverloaded}, want: true},
		{err: &model.Error{Kind: model.ErrRateLimited}, want: true},
		{err: fmt.Errorf("turn: %w", &model.Error{Kind: model.ErrServer}), want: true},
		{err: &model.Error{Kind: model.ErrInvalid}, want: false},
		{err: errors.New("not a model error"), want: false},
		{err: context.Canceled, want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, model.IsRetryable(tt.err), "%v", tt.err)
	}
}
