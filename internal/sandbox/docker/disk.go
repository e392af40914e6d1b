package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/disks"
)

// Workspace disk (docs/sandbox-docker.md, "Disk"). The engine bounds no named volume, so a
// bounded workspace volume is a bind of a filesystem of the bound's size (package disks: an
// ext4 image loop-mounted on this host) made before the volume. Everything else keeps
// naming the volume: the pool's claims, Destroy and the sweeps find the disk by the
// volume's name.

// Defaults of the disk settings.
const (
	// DefaultDiskBytes bounds a workspace whose spec names no size, as the kubernetes
	// provider's default workspace size does.
	DefaultDiskBytes = 10 << 30
	// DefaultDiskDir holds the workspace images and their mount points.
	DefaultDiskDir = "/var/lib/managed-agents/disks"
	// DiskUnbounded in Config.DiskBytes leaves workspaces on plain volumes, bounded only by
	// the engine's disk (MANAGED_AGENT_DOCKER_DISK=0).
	DiskUnbounded = -1
)

// workspaceUID and workspaceGID own a workspace (User).
const workspaceUID, workspaceGID = 1000, 1000

// newDisks checks the disk settings can be honoured: the engine must be this host's, since
// the disks are mounted here.
func newDisks(cfg Config) (*disks.Disks, error) {
	if cfg.DiskBytes == DiskUnbounded {
		return nil, nil
	}
	if host := os.Getenv("DOCKER_HOST"); host != "" && !strings.HasPrefix(host, "unix://") {
		return nil, fmt.Errorf("docker sandbox: workspace disks are mounted on this host but DOCKER_HOST=%s is another; run the workers on the engine's host, or set MANAGED_AGENT_DOCKER_DISK=0 to leave workspaces unbounded", host)
	}
	d, err := disks.New(cfg.DiskDir)
	if err != nil {
		return nil, fmt.Errorf("docker sandbox: %w; or set MANAGED_AGENT_DOCKER_DISK=0 to leave workspaces unbounded (docs/sandbox-docker.md)", err)
	}
	return d, nil
}

// diskSize is a spec's workspace size.
func (p *Provider) diskSize(spec sandbox.Spec) int64 {
	if spec.Resources.DiskBytes > 0 {
		return max(spec.Resources.DiskBytes, disks.MinSize)
	}
	return p.cfg.DiskBytes
}

// createWorkspace makes the workspace volume vol (its disk first, when bounded). Creating a
// volume that exists returns it, so concurrent and retried creates agree.
func (p *Provider) createWorkspace(ctx context.Context, vol string, size int64, labels map[string]string) error {
	opts := client.VolumeCreateOptions{Name: vol, Labels: labels}
	if p.disks != nil {
		mnt, err := p.disks.Ensure(ctx, vol, size, workspaceUID, workspaceGID)
		if err != nil {
			return fmt.Errorf("create workspace disk of %s: %w", vol, err)
		}
		opts.Driver = "local"
		opts.DriverOpts = map[string]string{"type": "none", "o": "bind", "device": mnt}
	}
	if _, err := p.engine.VolumeCreate(ctx, opts); err != nil {
		return fmt.Errorf("create workspace volume %s: %w", vol, err)
	}
	return nil
}

// removeWorkspace removes the volume vol and then its disk; either being gone is not an
// error. force is VolumeRemove's.
func (p *Provider) removeWorkspace(ctx context.Context, vol string, force bool) error {
	if _, err := p.engine.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: force}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove workspace volume %s: %w", vol, err)
	}
	if p.disks == nil {
		return nil
	}
	if err := p.disks.Remove(ctx, vol); err != nil {
		return fmt.Errorf("remove workspace disk of %s: %w", vol, err)
	}
	return nil
}

// mountWorkspace mounts the disk of a container's workspace volume again before the
// container starts: after a reboot the bind would otherwise find an empty, unbounded
// directory.
func (p *Provider) mountWorkspace(ctx context.Context, info container.InspectResponse) error {
	if p.disks == nil {
		return nil
	}
	for _, m := range info.Mounts {
		if m.Destination != Workspace || m.Name == "" {
			continue
		}
		if _, err := os.Stat(p.disks.Path(m.Name)); err != nil {
			return nil // an unbounded volume made before the disks were configured
		}
		if _, err := p.disks.Ensure(ctx, m.Name, p.cfg.DiskBytes, workspaceUID, workspaceGID); err != nil {
			return fmt.Errorf("mount the workspace disk of %s: %w", info.Name, err)
		}
	}
	return nil
}

// diskOrphanAge is how old a disk without a container must be before the sweep reports it:
// a Create makes the disk before the volume and the container.
const diskOrphanAge = 10 * time.Minute

// orphanDisks adds to listed the sandboxes of workspace disks whose container is gone (a
// worker that died between the disk and the container), so the sweep destroys them. Pool
// disks are the pool's to remove.
func (p *Provider) orphanDisks(listed []sandbox.Resource) []sandbox.Resource {
	if p.disks == nil {
		return listed
	}
	names, err := p.disks.Names()
	if err != nil {
		p.cfg.Logger.Warn("docker sandbox: could not list workspace disks", "error", err)
		return listed
	}
	have := map[string]bool{}
	for _, r := range listed {
		have[r.Ref.ExternalID] = true
	}
	for _, n := range names {
		name, ok := strings.CutSuffix(n, "-workspace")
		if !ok || !sandbox.IsName(name) || have[name] {
			continue
		}
		st, err := os.Stat(p.disks.Path(n))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil && time.Since(st.ModTime()) < diskOrphanAge {
			continue
		}
		have[name] = true
		listed = append(listed, sandbox.Resource{Ref: sandbox.Ref{Provider: Name, ExternalID: name}, Created: time.Now().Add(-diskOrphanAge)})
	}
	return listed
}
