package sessions

import (
	"context"
	"errors"

	"github.com/managed-agents/managed-agents/internal/store"
)

// ErrUnknownKey is returned for an API key the server does not know.
var ErrUnknownKey = errors.New("unknown api key")

// Authenticate returns the workspace of an API key.
func (s *Service) Authenticate(ctx context.Context, key string) (string, error) {
	ws, err := s.store.WorkspaceForKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrUnknownKey
	}
	return ws, err
}
