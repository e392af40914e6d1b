package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pkgspec"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// CreateEnvironment validates and stores an environment. Names are unique per workspace.
func (s *Service) CreateEnvironment(ctx context.Context, workspaceID string, p wire.EnvironmentCreateParams) (wire.Environment, error) {
	if err := checkLen("name", p.Name, 1, maxNameLen); err != nil {
		return wire.Environment{}, err
	}
	if p.Description != nil {
		if err := checkLen("description", *p.Description, 0, maxDescriptionLen); err != nil {
			return wire.Environment{}, err
		}
	}
	cfg, err := resolveEnvironmentConfig(p.Config, nil)
	if err != nil {
		return wire.Environment{}, err
	}
	scope, err := resolveScope(p.Scope)
	if err != nil {
		return wire.Environment{}, err
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return wire.Environment{}, err
	}
	rawCfg, err := json.Marshal(cfg)
	if err != nil {
		return wire.Environment{}, fmt.Errorf("encode environment config: %w", err)
	}
	now := s.now()
	rec := store.EnvironmentRecord{ID: ids.New(ids.Environment), WorkspaceID: workspaceID, Name: p.Name, Description: p.Description,
		Config: rawCfg, Scope: scope, Metadata: p.Metadata, CreatedAt: now, UpdatedAt: now}
	if err := s.store.InsertEnvironment(ctx, rec); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			return wire.Environment{}, conflictf("an environment named %q already exists", p.Name)
		}
		return wire.Environment{}, err
	}
	return environmentFromRecord(rec)
}

func resolveScope(p *string) (string, error) {
	if p == nil {
		return "organization", nil
	}
	if *p != "organization" && *p != "account" {
		return "", invalidf("scope: must be organization or account")
	}
	return *p, nil
}

var hostPattern = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// resolveEnvironmentConfig validates a config param; on update, cur is the stored config and
// omitted sub-fields keep their stored values.
func resolveEnvironmentConfig(p *wire.EnvironmentConfigParam, cur *wire.EnvironmentConfig) (wire.EnvironmentConfig, error) {
	if p == nil {
		if cur != nil {
			return *cur, nil
		}
		p = &wire.EnvironmentConfigParam{Type: "cloud"}
	}
	if cur != nil && cur.Type != p.Type {
		return wire.EnvironmentConfig{}, invalidf("config.type: cannot change from %s to %s", cur.Type, p.Type).withCode("invalid_config_type_change")
	}
	switch p.Type {
	case "self_hosted":
		if p.Networking != nil || p.Packages != nil {
			return wire.EnvironmentConfig{}, invalidf("config: a self_hosted config has no other fields")
		}
		return wire.EnvironmentConfig{Type: "self_hosted"}, nil
	case "cloud":
	default:
		return wire.EnvironmentConfig{}, invalidf("config.type: must be cloud or self_hosted")
	}
	out := wire.EnvironmentConfig{Type: "cloud", Networking: &wire.Networking{Type: "unrestricted"}, Packages: emptyPackages()}
	if cur != nil {
		out.Networking, out.Packages = cur.Networking, cur.Packages
	}
	if p.Networking != nil {
		n, err := resolveNetworking(*p.Networking)
		if err != nil {
			return wire.EnvironmentConfig{}, err
		}
		out.Networking = n
	}
	if p.Packages != nil {
		pk, err := resolvePackages(*p.Packages)
		if err != nil {
			return wire.EnvironmentConfig{}, err
		}
		out.Packages = pk
	}
	if out.Networking.Type == "limited" && hasPackages(out.Packages) && (out.Networking.AllowPackageManagers == nil || !*out.Networking.AllowPackageManagers) {
		return wire.EnvironmentConfig{}, invalidf("config.packages: limited networking needs allow_package_managers: true to install packages")
	}
	return out, nil
}

func resolveNetworking(p wire.NetworkingParam) (*wire.Networking, error) {
	switch p.Type {
	case "unrestricted":
		if p.AllowedHosts != nil || p.AllowMCPServers != nil || p.AllowPackageManagers != nil {
			return nil, invalidf("config.networking: unrestricted networking takes no other fields")
		}
		return &wire.Networking{Type: "unrestricted"}, nil
	case "limited":
	default:
		return nil, invalidf("config.networking.type: must be unrestricted or limited")
	}
	for i, h := range p.AllowedHosts {
		if !hostPattern.MatchString(h) {
			return nil, invalidf("config.networking.allowed_hosts[%d]: %q must be a bare hostname or *.domain wildcard (no scheme, port or path)", i, wire.Excerpt(h, maxQuoted))
		}
	}
	f := false
	n := &wire.Networking{Type: "limited", AllowedHosts: p.AllowedHosts, AllowMCPServers: &f, AllowPackageManagers: &f}
	if p.AllowMCPServers != nil {
		n.AllowMCPServers = p.AllowMCPServers
	}
	if p.AllowPackageManagers != nil {
		n.AllowPackageManagers = p.AllowPackageManagers
	}
	if n.AllowedHosts == nil {
		n.AllowedHosts = []string{}
	}
	return n, nil
}

func emptyPackages() *wire.Packages {
	return &wire.Packages{Type: "packages", Apt: []string{}, Cargo: []string{}, Gem: []string{}, Go: []string{}, Npm: []string{}, Pip: []string{}}
}

func resolvePackages(p wire.PackagesParam) (*wire.Packages, error) {
	if p.Type != nil && *p.Type != "packages" {
		return nil, invalidf("config.packages.type: must be packages")
	}
	out := emptyPackages()
	for _, m := range []struct {
		name string
		in   []string
		out  *[]string
	}{{"apt", p.Apt, &out.Apt}, {"cargo", p.Cargo, &out.Cargo}, {"gem", p.Gem, &out.Gem}, {"go", p.Go, &out.Go}, {"npm", p.Npm, &out.Npm}, {"pip", p.Pip, &out.Pip}} {
		if len(m.in) > maxPackagesPerManager {
			return nil, invalidf("config.packages.%s: at most %d packages are allowed (got %d)", m.name, maxPackagesPerManager, len(m.in))
		}
		for i, spec := range m.in {
			if err := checkLen(fmt.Sprintf("config.packages.%s[%d]", m.name, i), spec, 1, maxPackageSpecLen); err != nil {
				return nil, err
			}
			// The sandbox refuses what its package manager would misread; refuse it here,
			// before the environment exists, not when its first sandbox is built.
			if err := pkgspec.Check(spec); err != nil {
				return nil, invalidf("config.packages.%s[%d]: %q: %v", m.name, i, spec, err)
			}
		}
		if m.in != nil {
			*m.out = m.in
		}
	}
	return out, nil
}

func hasPackages(p *wire.Packages) bool {
	return p != nil && len(p.Apt)+len(p.Cargo)+len(p.Gem)+len(p.Go)+len(p.Npm)+len(p.Pip) > 0
}

func environmentFromRecord(r store.EnvironmentRecord) (wire.Environment, error) {
	var cfg wire.EnvironmentConfig
	if err := json.Unmarshal(r.Config, &cfg); err != nil {
		return wire.Environment{}, fmt.Errorf("decode environment %s config: %w", r.ID, err)
	}
	return wire.Environment{ID: r.ID, Type: "environment", Name: r.Name, Description: r.Description, Config: cfg, Scope: r.Scope,
		Metadata: r.Metadata, CreatedAt: wire.Time(r.CreatedAt), UpdatedAt: wire.Time(r.UpdatedAt), ArchivedAt: wire.TimePtr(r.ArchivedAt)}, nil
}

// GetEnvironment returns an environment of the workspace.
func (s *Service) GetEnvironment(ctx context.Context, workspaceID, id string) (wire.Environment, error) {
	rec, err := s.store.GetEnvironment(ctx, workspaceID, id, false)
	if err != nil {
		return wire.Environment{}, notFoundAs(err, "environment %s not found", id)
	}
	return environmentFromRecord(rec)
}

// UpdateEnvironment patches an environment; the config type cannot change.
func (s *Service) UpdateEnvironment(ctx context.Context, workspaceID, id string, p wire.EnvironmentUpdateParams) (wire.Environment, error) {
	var out wire.Environment
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetEnvironment(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "environment %s not found", id)
		}
		if rec.ArchivedAt != nil {
			return invalidf("environment %s is archived and cannot be updated", id).withCode("environment_archived")
		}
		cur, err := environmentFromRecord(rec)
		if err != nil {
			return err
		}
		if p.Name.Set {
			if p.Name.Null {
				return invalidf("name: cannot be cleared")
			}
			if err := checkLen("name", p.Name.Value, 1, maxNameLen); err != nil {
				return err
			}
			rec.Name = p.Name.Value
		}
		if p.Description.Set {
			// null clears; "" is stored as an empty description (API.md §2.2).
			rec.Description = nil
			if !p.Description.Null {
				if err := checkLen("description", p.Description.Value, 0, maxDescriptionLen); err != nil {
					return err
				}
				d := p.Description.Value
				rec.Description = &d
			}
		}
		if p.Config.HasValue() {
			cfg, err := resolveEnvironmentConfig(&p.Config.Value, &cur.Config)
			if err != nil {
				return err
			}
			if rec.Config, err = json.Marshal(cfg); err != nil {
				return fmt.Errorf("encode environment config: %w", err)
			}
		}
		if p.Scope.Set {
			var in *string
			if !p.Scope.Null {
				in = &p.Scope.Value
			}
			if rec.Scope, err = resolveScope(in); err != nil {
				return err
			}
		}
		if p.Metadata != nil {
			if rec.Metadata, err = patchMetadata("metadata", rec.Metadata, p.Metadata, true); err != nil {
				return err
			}
		}
		rec.UpdatedAt = s.now()
		if err := q.UpdateEnvironment(ctx, rec); err != nil {
			if errors.Is(err, store.ErrDuplicate) {
				return conflictf("an environment named %q already exists", rec.Name)
			}
			return err
		}
		out, err = environmentFromRecord(rec)
		return err
	})
	return out, err
}

// ArchiveEnvironment archives an environment: existing sessions continue, new ones cannot
// use it. Archiving twice keeps the first archived_at.
func (s *Service) ArchiveEnvironment(ctx context.Context, workspaceID, id string) (wire.Environment, error) {
	var out wire.Environment
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetEnvironment(ctx, workspaceID, id, true)
		if err != nil {
			return notFoundAs(err, "environment %s not found", id)
		}
		if rec.ArchivedAt == nil {
			now := s.now()
			rec.ArchivedAt, rec.UpdatedAt = &now, now
			if err := q.UpdateEnvironment(ctx, rec); err != nil {
				return err
			}
		}
		out, err = environmentFromRecord(rec)
		return err
	})
	return out, err
}

// DeleteEnvironment deletes an environment no session references.
func (s *Service) DeleteEnvironment(ctx context.Context, workspaceID, id string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := q.GetEnvironment(ctx, workspaceID, id, true); err != nil {
			return notFoundAs(err, "environment %s not found", id)
		}
		inUse, err := q.EnvironmentInUse(ctx, id)
		if err != nil {
			return err
		}
		if inUse {
			return invalidf("environment %s is referenced by sessions; delete those sessions first", id)
		}
		return q.DeleteEnvironment(ctx, id)
	})
}

// ListEnvironments returns one page of environments.
func (s *Service) ListEnvironments(ctx context.Context, workspaceID string, p ListParams) ([]wire.Environment, bool, error) {
	recs, more, err := s.store.ListEnvironments(ctx, workspaceID, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]wire.Environment, len(recs))
	for i, r := range recs {
		if out[i], err = environmentFromRecord(r); err != nil {
			return nil, false, err
		}
	}
	return out, more, nil
}
