package sessions

import (
	"context"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// maxVaultNameLen bounds vault and credential display names (the SDK's 1-255).
const maxVaultNameLen = 255

func vaultFromRecord(r store.VaultRecord) wire.Vault {
	return wire.Vault{ID: r.ID, Type: "vault", DisplayName: r.DisplayName, Metadata: r.Metadata,
		CreatedAt: wire.Time(r.CreatedAt), UpdatedAt: wire.Time(r.UpdatedAt), ArchivedAt: wire.TimePtr(r.ArchivedAt)}
}

// CreateVault stores a vault.
func (s *Service) CreateVault(ctx context.Context, workspaceID string, p wire.VaultCreateParams) (wire.Vault, error) {
	if err := checkLen("display_name", p.DisplayName, 1, maxVaultNameLen); err != nil {
		return wire.Vault{}, err
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return wire.Vault{}, err
	}
	now := s.now()
	rec := store.VaultRecord{ID: ids.New(ids.Vault), WorkspaceID: workspaceID, DisplayName: p.DisplayName, Metadata: p.Metadata,
		CreatedAt: now, UpdatedAt: now}
	if err := s.store.InsertVault(ctx, rec); err != nil {
		return wire.Vault{}, err
	}
	return vaultFromRecord(rec), nil
}

// GetVault returns a vault of the workspace.
func (s *Service) GetVault(ctx context.Context, workspaceID, id string) (wire.Vault, error) {
	rec, err := s.store.GetVault(ctx, workspaceID, id, false)
	if err != nil {
		return wire.Vault{}, notFoundAs(err, "vault %s not found", id)
	}
	return vaultFromRecord(rec), nil
}

// UpdateVault changes the display name or patches the metadata of an active vault.
func (s *Service) UpdateVault(ctx context.Context, workspaceID, id string, p wire.VaultUpdateParams) (wire.Vault, error) {
	var out wire.Vault
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetVault(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "vault %s not found", id)
		}
		if rec.ArchivedAt != nil {
			return invalidf("vault %s is archived and cannot be updated", id)
		}
		if p.DisplayName.Set {
			if p.DisplayName.Null {
				return invalidf("display_name: cannot be cleared")
			}
			if err := checkLen("display_name", p.DisplayName.Value, 1, maxVaultNameLen); err != nil {
				return err
			}
			rec.DisplayName = p.DisplayName.Value
		}
		if p.Metadata != nil {
			if rec.Metadata, err = patchMetadata("metadata", rec.Metadata, p.Metadata, false); err != nil {
				return err
			}
		}
		rec.UpdatedAt = s.now()
		if err := q.UpdateVault(ctx, rec); err != nil {
			return err
		}
		out = vaultFromRecord(rec)
		return nil
	})
	return out, err
}

// ArchiveVault archives a vault: sessions stop resolving credentials from it and new
// sessions cannot name it. Archiving twice keeps the first archived_at.
func (s *Service) ArchiveVault(ctx context.Context, workspaceID, id string) (wire.Vault, error) {
	var out wire.Vault
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetVault(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "vault %s not found", id)
		}
		if rec.ArchivedAt == nil {
			now := s.now()
			rec.ArchivedAt, rec.UpdatedAt = &now, now
			if err := q.UpdateVault(ctx, rec); err != nil {
				return err
			}
		}
		out = vaultFromRecord(rec)
		return nil
	})
	return out, err
}

// DeleteVault deletes a vault and its credentials. Sessions that name it keep the id and
// resolve nothing from it.
func (s *Service) DeleteVault(ctx context.Context, workspaceID, id string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := q.GetVault(ctx, workspaceID, id, true); err != nil {
			return notFoundAs(err, "vault %s not found", id)
		}
		return q.DeleteVault(ctx, id)
	})
}

// ListVaults returns one page of vaults.
func (s *Service) ListVaults(ctx context.Context, workspaceID string, p ListParams) ([]wire.Vault, bool, error) {
	recs, more, err := s.store.ListVaults(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]wire.Vault, len(recs))
	for i, r := range recs {
		out[i] = vaultFromRecord(r)
	}
	return out, more, nil
}

// checkSessionVaults validates a session's vault_ids: each a vault of the workspace, not
// archived, named once.
func checkSessionVaults(ctx context.Context, q *store.Queries, workspaceID string, vaultIDs []string) error {
	if len(vaultIDs) == 0 {
		return nil
	}
	if len(vaultIDs) > maxSessionVaults {
		return invalidf("vault_ids: at most %d vaults are allowed (got %d)", maxSessionVaults, len(vaultIDs))
	}
	seen := map[string]bool{}
	for i, id := range vaultIDs {
		if seen[id] {
			return invalidf("vault_ids[%d]: vault %s is listed twice", i, wire.Excerpt(id, maxQuoted))
		}
		seen[id] = true
	}
	found, err := q.UsableVaults(ctx, workspaceID, vaultIDs)
	if err != nil {
		return err
	}
	for i, id := range vaultIDs {
		archived, ok := found[id]
		if !ok {
			return notFoundf("vault_ids[%d]: vault %s not found", i, wire.Excerpt(id, maxQuoted))
		}
		if archived {
			return invalidf("vault_ids[%d]: vault %s is archived", i, id)
		}
	}
	return nil
}

// maxSessionVaults bounds vault_ids on a session (resolution walks them in order).
const maxSessionVaults = 20
