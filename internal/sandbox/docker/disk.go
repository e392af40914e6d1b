package docker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/volume"
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

// workspaceVolumeOptions are the driver options of the bounded workspace volume vol: also
// set on the container's mount, so an engine that finds the volume gone (a Destroy racing a
// Create) makes it again as the same bind, never as a plain, unbounded volume.
func (p *Provider) workspaceVolumeOptions(vol string) *mount.VolumeOptions {
	if p.disks == nil {
		return nil
	}
	return &mount.VolumeOptions{DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
		"type": "none", "o": "bind", "device": p.disks.Path(vol)}}}
}

// mountWorkspace mounts the disk of a container's workspace volume again before the
// container starts: after a reboot the bind would otherwise find the bare mount point (which
// its marker makes unwritable). The volume says where its disk is, whatever this worker's
// settings are now; a disk this worker cannot mount is an error, never a start without it.
func (p *Provider) mountWorkspace(ctx context.Context, info container.InspectResponse) error {
	for _, m := range info.Mounts {
		if m.Destination != Workspace || m.Name == "" {
			continue
		}
		vol, err := p.engine.VolumeInspect(ctx, m.Name, client.VolumeInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect the workspace volume of %s: %w", info.Name, err)
		}
		device := vol.Volume.Options["device"]
		if device == "" {
			return nil // a plain volume: unbounded, nothing to mount
		}
		if p.disks == nil || device != p.disks.Path(m.Name) {
			return fmt.Errorf("start docker sandbox %s: its workspace disk is %s, which this worker does not manage (MANAGED_AGENT_DOCKER_DISK, MANAGED_AGENT_DOCKER_DISK_DIR changed since it was made): run it with the settings it was made with, or delete the session", info.Name, device)
		}
		if _, err := p.disks.Ensure(ctx, m.Name, p.cfg.DiskBytes, workspaceUID, workspaceGID); err != nil {
			return fmt.Errorf("mount the workspace disk of %s: %w", info.Name, err)
		}
	}
	return nil
}

// diskOrphanAge is how old a disk without a volume must be before the sweep removes it: a
// Create makes the disk before the volume.
const diskOrphanAge = 10 * time.Minute

// orphanDisks removes workspace disks whose volume is gone (a worker that died between the
// disk and the volume, or between removing the volume and the disk), pool disks included,
// and adds to listed the sandboxes whose workspace volume outlived its container (a Create
// that failed after the volume), with the session its labels name, so the sweep destroys
// them as it does orphaned networks. The disk directory may be shared by every deployment
// on the host: another deployment's volumes are left to it.
func (p *Provider) orphanDisks(ctx context.Context, listed []sandbox.Resource) []sandbox.Resource {
	if p.disks == nil {
		return listed
	}
	names, err := p.disks.Names()
	if err != nil {
		p.cfg.Logger.WarnContext(ctx, "docker sandbox: could not list workspace disks", "error", err)
		return listed
	}
	if len(names) == 0 {
		return listed
	}
	// One listing of every volume, not an inspect per disk: the directory may hold the
	// disks of every deployment on the host, and this runs on every sweep.
	res, err := p.engine.VolumeList(ctx, client.VolumeListOptions{})
	if err != nil {
		p.cfg.Logger.WarnContext(ctx, "docker sandbox: could not list volumes for the workspace disks", "error", err)
		return listed
	}
	volumes := make(map[string]volume.Volume, len(res.Items))
	for _, v := range res.Items {
		volumes[v.Name] = v
	}
	have := map[string]bool{}
	for _, r := range listed {
		have[r.Ref.ExternalID] = true
	}
	for _, n := range names {
		vol, ok := volumes[n]
		if !ok {
			if st, serr := os.Stat(p.disks.Path(n)); serr == nil && time.Since(st.ModTime()) < diskOrphanAge {
				continue
			}
			if err := p.disks.Remove(ctx, n); err != nil {
				p.cfg.Logger.WarnContext(ctx, "docker sandbox: could not remove an orphaned workspace disk", "disk", n, "error", err)
			} else {
				p.cfg.Logger.InfoContext(ctx, "docker sandbox: removed an orphaned workspace disk", "disk", n)
			}
			continue
		}
		if vol.Labels[LabelDeployment] != p.cfg.Deployment {
			continue
		}
		name, ok := strings.CutSuffix(n, "-workspace")
		if !ok || !sandbox.IsName(name) || have[name] {
			continue
		}
		created, err := time.Parse(time.RFC3339, vol.CreatedAt)
		if err != nil {
			created = time.Now() // unknown age: the next sweeps will see it again
		}
		have[name] = true
		listed = append(listed, sandbox.Resource{Ref: sandbox.Ref{Provider: Name, ExternalID: name}, SessionID: vol.Labels[LabelSession], Created: created})
	}
	return listed
}
