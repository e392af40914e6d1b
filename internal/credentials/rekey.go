package credentials

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/store"
)

// rekeyBatch is how many credentials one read of the walk returns.
const rekeyBatch = 100

// Rekey reseals, with the keyring's primary key, every credential sealed with another key,
// each in its own transaction under its row lock (a concurrent refresh or update waits, and a
// credential it already resealed is skipped). It returns how many it resealed. A credential
// whose key is not in the keyring stops the walk with an error naming it; those before it
// stay resealed, so running it again after fixing the keyring finishes the job.
func Rekey(ctx context.Context, st *store.Store, keys *secretbox.Keyring, logger *slog.Logger) (int, error) {
	if keys.Empty() {
		return 0, secretbox.ErrNoKeys
	}
	primary := keys.Primary()
	resealed := 0
	after := ""
	for {
		batch, err := st.SealedCredentialsAfter(ctx, after, rekeyBatch)
		if err != nil {
			return resealed, err
		}
		if len(batch) == 0 {
			return resealed, nil
		}
		for _, c := range batch {
			after = c.ID
			if id, _, err := secretbox.KeyID(c.Sealed); err == nil && id == primary {
				continue
			}
			done, err := reseal(ctx, st, keys, c.ID)
			if err != nil {
				return resealed, err
			}
			if done {
				resealed++
			}
		}
		logger.InfoContext(ctx, "resealing vault credentials", "resealed", resealed, "key", primary)
	}
}

func reseal(ctx context.Context, st *store.Store, keys *secretbox.Keyring, id string) (bool, error) {
	done := false
	err := st.InTx(ctx, func(q *store.Queries) error {
		sealed, err := q.LockSealedCredential(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if k, _, err := secretbox.KeyID(sealed); err == nil && k == keys.Primary() {
			return nil // resealed meanwhile (a refresh or an update)
		}
		plain, err := keys.Open(sealed, id)
		if err != nil {
			return fmt.Errorf("credential %s: %w", id, err)
		}
		again, err := keys.Seal(plain, id)
		if err != nil {
			return err
		}
		if err := q.Reseal(ctx, id, again); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}
