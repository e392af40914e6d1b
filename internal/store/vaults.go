package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/managed-agents/managed-agents/internal/secretbox"
)

// VaultRecord is a vault row.
type VaultRecord struct {
	ID          string
	WorkspaceID string
	DisplayName string
	Metadata    map[string]string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ArchivedAt  *time.Time
}

const vaultColumns = `t.id, t.workspace_id, t.display_name, t.metadata, t.created_at, t.updated_at, t.archived_at`

func scanVault(row pgx.Row) (VaultRecord, error) {
	var r VaultRecord
	err := row.Scan(&r.ID, &r.WorkspaceID, &r.DisplayName, &r.Metadata, &r.CreatedAt, &r.UpdatedAt, &r.ArchivedAt)
	return r, err
}

// InsertVault creates a vault.
func (q *Queries) InsertVault(ctx context.Context, r VaultRecord) error {
	_, err := q.db.Exec(ctx, `INSERT INTO vaults (id, workspace_id, display_name, metadata, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)`, r.ID, r.WorkspaceID, r.DisplayName, nonNilMap(r.Metadata), r.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert vault: %w", classify(err))
	}
	return nil
}

// GetVault returns a vault of the workspace, optionally locking it.
func (q *Queries) GetVault(ctx context.Context, workspaceID, id string, forUpdate bool) (VaultRecord, error) {
	sql := `SELECT ` + vaultColumns + ` FROM vaults t WHERE t.id = $1 AND t.workspace_id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	r, err := scanVault(q.db.QueryRow(ctx, sql, id, workspaceID))
	if err != nil {
		return VaultRecord{}, fmt.Errorf("get vault %s: %w", id, classify(err))
	}
	return r, nil
}

// UpdateVault writes every mutable column of r.
func (q *Queries) UpdateVault(ctx context.Context, r VaultRecord) error {
	_, err := q.db.Exec(ctx, `UPDATE vaults SET display_name = $2, metadata = $3, updated_at = $4, archived_at = $5 WHERE id = $1`,
		r.ID, r.DisplayName, nonNilMap(r.Metadata), r.UpdatedAt, r.ArchivedAt)
	if err != nil {
		return fmt.Errorf("update vault: %w", classify(err))
	}
	return nil
}

// DeleteVault removes a vault and, by cascade, its credentials.
func (q *Queries) DeleteVault(ctx context.Context, id string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM vaults WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete vault: %w", classify(err))
	}
	return nil
}

// ListVaults returns one page of vaults.
func (q *Queries) ListVaults(ctx context.Context, workspaceID string, p ListParams) ([]VaultRecord, bool, error) {
	var b sqlBuilder
	b.where("t.workspace_id = %s", workspaceID)
	suffix, reversed := b.page(p, "t.archived_at")
	rows, err := q.db.Query(ctx, `SELECT `+vaultColumns+` FROM vaults t`+suffix, b.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list vaults: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (VaultRecord, error) { return scanVault(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list vaults: %w", err)
	}
	out, more := trim(out, p.Limit, reversed)
	return out, more, nil
}

// CredentialRecord is a vault credential row. Auth is the non-secret part of the auth
// object, as the API echoes it; Sealed is the encrypted secret part (internal/secretbox),
// bound to the credential id.
type CredentialRecord struct {
	ID          string
	VaultID     string
	DisplayName *string
	Metadata    map[string]string
	AuthType    string
	// MatchURL is the normalized MCP server URL; nil for environment_variable credentials.
	MatchURL   *string
	Auth       json.RawMessage
	Sealed     []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
	ArchivedAt *time.Time
}

const credentialColumns = `t.id, t.vault_id, t.display_name, t.metadata, t.auth_type, t.match_url, t.auth, t.sealed, t.created_at, t.updated_at, t.archived_at`

func scanCredential(row pgx.Row) (CredentialRecord, error) {
	var r CredentialRecord
	err := row.Scan(&r.ID, &r.VaultID, &r.DisplayName, &r.Metadata, &r.AuthType, &r.MatchURL, &r.Auth, &r.Sealed, &r.CreatedAt, &r.UpdatedAt, &r.ArchivedAt)
	return r, err
}

// InsertCredential creates a credential; a second active credential for one MCP server in a
// vault is ErrDuplicate.
func (q *Queries) InsertCredential(ctx context.Context, r CredentialRecord) error {
	_, err := q.db.Exec(ctx, `INSERT INTO vault_credentials (id, vault_id, display_name, metadata, auth_type, match_url, auth, sealed, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
		r.ID, r.VaultID, r.DisplayName, nonNilMap(r.Metadata), r.AuthType, r.MatchURL, r.Auth, r.Sealed, r.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert credential: %w", classify(err))
	}
	return nil
}

// GetCredential returns a credential of a vault of the workspace, optionally locking it.
func (q *Queries) GetCredential(ctx context.Context, workspaceID, vaultID, id string, forUpdate bool) (CredentialRecord, error) {
	sql := `SELECT ` + credentialColumns + ` FROM vault_credentials t JOIN vaults v ON v.id = t.vault_id
		WHERE t.id = $1 AND t.vault_id = $2 AND v.workspace_id = $3`
	if forUpdate {
		sql += ` FOR UPDATE OF t`
	}
	r, err := scanCredential(q.db.QueryRow(ctx, sql, id, vaultID, workspaceID))
	if err != nil {
		return CredentialRecord{}, fmt.Errorf("get credential %s: %w", id, classify(err))
	}
	return r, nil
}

// CountActiveCredentials counts a vault's credentials that are not archived.
func (q *Queries) CountActiveCredentials(ctx context.Context, vaultID string) (int, error) {
	var n int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM vault_credentials WHERE vault_id = $1 AND archived_at IS NULL`, vaultID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count credentials: %w", err)
	}
	return n, nil
}

// UpdateCredential writes every mutable column of r.
func (q *Queries) UpdateCredential(ctx context.Context, r CredentialRecord) error {
	_, err := q.db.Exec(ctx, `UPDATE vault_credentials SET display_name = $2, metadata = $3, auth = $4, sealed = $5,
		updated_at = $6, archived_at = $7 WHERE id = $1`,
		r.ID, r.DisplayName, nonNilMap(r.Metadata), r.Auth, r.Sealed, r.UpdatedAt, r.ArchivedAt)
	if err != nil {
		return fmt.Errorf("update credential: %w", classify(err))
	}
	return nil
}

// DeleteCredential removes a credential.
func (q *Queries) DeleteCredential(ctx context.Context, id string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM vault_credentials WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete credential: %w", classify(err))
	}
	return nil
}

// ListCredentials returns one page of a vault's credentials.
func (q *Queries) ListCredentials(ctx context.Context, vaultID string, p ListParams) ([]CredentialRecord, bool, error) {
	var b sqlBuilder
	b.where("t.vault_id = %s", vaultID)
	suffix, reversed := b.page(p, "t.archived_at")
	rows, err := q.db.Query(ctx, `SELECT `+credentialColumns+` FROM vault_credentials t`+suffix, b.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list credentials: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CredentialRecord, error) { return scanCredential(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list credentials: %w", err)
	}
	out, more := trim(out, p.Limit, reversed)
	return out, more, nil
}

// UsableVaults returns which of ids are vaults of the workspace, and whether each is
// archived, by id.
func (q *Queries) UsableVaults(ctx context.Context, workspaceID string, ids []string) (map[string]bool, error) {
	rows, err := q.db.Query(ctx, `SELECT id, archived_at IS NOT NULL FROM vaults WHERE workspace_id = $1 AND id = ANY($2)`, workspaceID, ids)
	if err != nil {
		return nil, fmt.Errorf("look up vaults: %w", err)
	}
	out := map[string]bool{}
	var id string
	var archived bool
	_, err = pgx.ForEachRow(rows, []any{&id, &archived}, func() error {
		out[id] = archived
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up vaults: %w", err)
	}
	return out, nil
}

// SessionVaults returns a session's workspace and vault ids, in order.
func (q *Queries) SessionVaults(ctx context.Context, sessionID string) (workspaceID string, vaultIDs []string, err error) {
	err = q.db.QueryRow(ctx, `SELECT workspace_id, vault_ids FROM sessions WHERE id = $1`, sessionID).Scan(&workspaceID, &vaultIDs)
	if err != nil {
		return "", nil, fmt.Errorf("get session %s vaults: %w", sessionID, classify(err))
	}
	return workspaceID, vaultIDs, nil
}

// MatchingCredential returns the first active credential for the MCP server matchURL (a
// normalized URL) over the active vaults vaultIDs of the workspace, in the order of vaultIDs;
// ErrNotFound if there is none. forUpdate locks the credential row.
func (q *Queries) MatchingCredential(ctx context.Context, workspaceID string, vaultIDs []string, matchURL string, forUpdate bool) (CredentialRecord, error) {
	sql := `SELECT ` + credentialColumns + ` FROM vault_credentials t JOIN vaults v ON v.id = t.vault_id
		WHERE v.workspace_id = $1 AND v.id = ANY($2) AND v.archived_at IS NULL AND t.archived_at IS NULL
		AND t.match_url = $3 AND t.auth_type IN ('static_bearer', 'mcp_oauth')
		ORDER BY array_position($2, v.id) LIMIT 1`
	if forUpdate {
		sql += ` FOR UPDATE OF t`
	}
	r, err := scanCredential(q.db.QueryRow(ctx, sql, workspaceID, vaultIDs, matchURL))
	if err != nil {
		return CredentialRecord{}, fmt.Errorf("match credential for %s: %w", matchURL, classify(err))
	}
	return r, nil
}

// SessionCredential returns the credential id if it is active in an active vault of
// vaultIDs in the workspace; forUpdate locks its row.
func (q *Queries) SessionCredential(ctx context.Context, workspaceID string, vaultIDs []string, id string, forUpdate bool) (CredentialRecord, error) {
	sql := `SELECT ` + credentialColumns + ` FROM vault_credentials t JOIN vaults v ON v.id = t.vault_id
		WHERE t.id = $3 AND v.workspace_id = $1 AND v.id = ANY($2) AND v.archived_at IS NULL AND t.archived_at IS NULL`
	if forUpdate {
		sql += ` FOR UPDATE OF t`
	}
	r, err := scanCredential(q.db.QueryRow(ctx, sql, workspaceID, vaultIDs, id))
	if err != nil {
		return CredentialRecord{}, fmt.Errorf("get credential %s: %w", id, classify(err))
	}
	return r, nil
}

// CredentialSecrets is the plaintext of CredentialRecord.Sealed: the write-only fields of a
// credential's auth, by type.
type CredentialSecrets struct {
	Token        string `json:"token,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	SecretValue  string `json:"secret_value,omitempty"`
}

// SealSecrets encrypts a credential's secrets with the keyring's primary key, bound to the
// credential id.
func SealSecrets(kr *secretbox.Keyring, credentialID string, s CredentialSecrets) ([]byte, error) {
	plain, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode credential secrets: %w", err)
	}
	sealed, err := kr.Seal(plain, credentialID)
	if err != nil {
		return nil, fmt.Errorf("seal credential %s: %w", credentialID, err)
	}
	return sealed, nil
}

// OpenSecrets decrypts a credential's secrets.
func OpenSecrets(kr *secretbox.Keyring, credentialID string, sealed []byte) (CredentialSecrets, error) {
	plain, err := kr.Open(sealed, credentialID)
	if err != nil {
		return CredentialSecrets{}, fmt.Errorf("open credential %s: %w", credentialID, err)
	}
	var s CredentialSecrets
	if err := json.Unmarshal(plain, &s); err != nil {
		return CredentialSecrets{}, fmt.Errorf("decode credential %s secrets: %w", credentialID, err)
	}
	return s, nil
}

// SealedCredential is a credential's id and ciphertext.
type SealedCredential struct {
	ID     string
	Sealed []byte
}

// SealedCredentialsAfter returns up to limit credentials (of every workspace) with ids after
// afterID, in id order, for a walk over all of them (key rotation).
func (q *Queries) SealedCredentialsAfter(ctx context.Context, afterID string, limit int) ([]SealedCredential, error) {
	rows, err := q.db.Query(ctx, `SELECT id, sealed FROM vault_credentials WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list sealed credentials: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SealedCredential])
	if err != nil {
		return nil, fmt.Errorf("list sealed credentials: %w", err)
	}
	return out, nil
}

// LockSealedCredential reads a credential's ciphertext under its row lock; ErrNotFound if it
// is gone.
func (q *Queries) LockSealedCredential(ctx context.Context, id string) ([]byte, error) {
	var sealed []byte
	if err := q.db.QueryRow(ctx, `SELECT sealed FROM vault_credentials WHERE id = $1 FOR UPDATE`, id).Scan(&sealed); err != nil {
		return nil, fmt.Errorf("lock credential %s: %w", id, classify(err))
	}
	return sealed, nil
}

// Reseal replaces a credential's ciphertext only (its updated_at is not an API change).
func (q *Queries) Reseal(ctx context.Context, id string, sealed []byte) error {
	if _, err := q.db.Exec(ctx, `UPDATE vault_credentials SET sealed = $2 WHERE id = $1`, id, sealed); err != nil {
		return fmt.Errorf("reseal credential %s: %w", id, err)
	}
	return nil
}

// SetLockTimeout bounds every lock wait of the current transaction (SET LOCAL lock_timeout).
func (q *Queries) SetLockTimeout(ctx context.Context, d time.Duration) error {
	if _, err := q.db.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", d.Milliseconds())); err != nil {
		return fmt.Errorf("set lock timeout: %w", classify(err))
	}
	return nil
}
