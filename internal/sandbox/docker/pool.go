package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/startstop"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The warm pool keeps Config.WarmPool started containers per (image, spec hash) ready, so a
// session's first acquisition is a rename instead of a create and start.
//
// A pool container is made exactly like a session's (CreateOptions of the spec with the
// session left out), under a name of its own (ma-pool-<random>, which the orphan sweep's List
// never reports) with a workspace volume of its own that nothing has touched: a session that
// claims it gets a fresh, private workspace. Its labels name the pool's owner (a random id per
// provider) instead of a session; labels are immutable, so a claim cannot add the session's.
//
// Claiming renames the container to the session's deterministic container name. That keeps
// Create's contract: a retried Create finds the container by that name and adopts it (it
// never claims a second), and the engine's name reservation lets only one of two concurrent
// Creates of a name win the rename; the loser puts its container back. Only the owner claims
// its pool containers (under a mutex), so no container is claimed twice. The session's
// mapping lives on a claim volume (<container>-claim) whose labels name the session and the
// pool's workspace volume: List reads it to report the session to the orphan sweep, and
// Destroy reads it to remove that workspace volume too.
//
// Pool containers left by a worker that died are removed by any worker's pool once older
// than poolMaxAge, and a pool removes its own when their image changed (make sandbox-image).
// Stop removes the pool's unclaimed containers.

// Labels of pool containers and claim volumes.
const (
	LabelPool      = "managed-agents.pool"
	LabelPoolImage = "managed-agents.pool-image-id"
	LabelClaim     = "managed-agents.claim"
	LabelClaimVol  = "managed-agents.claim-workspace"
)

const (
	poolPrefix = "ma-pool-"
	// poolMaxAge is how long an unclaimed pool container lives when its owner may be gone.
	poolMaxAge = time.Hour
	// poolTick is how often the pool reconciles with the engine besides refilling on claims.
	poolTick = 30 * time.Second
	// poolMakeTimeout bounds the engine calls that make a pool container once its image is
	// there: they run to their end even when Stop cancels the refill.
	poolMakeTimeout = 2 * time.Minute
	// poolRecentSpecs bounds the environments (besides the default one) kept warm, and
	// poolRecentFor how long one stays warm after its last session was created.
	poolRecentSpecs = 8
	poolRecentFor   = time.Hour
)

// claimVolume is the claim volume of a session's container name.
func claimVolume(containerName string) string { return containerName + "-claim" }

type pool struct {
	p      *Provider
	size   int
	owner  string
	logger *slog.Logger
	loop   startstop.Loop
	wake   chan struct{}

	mu    sync.Mutex
	ready map[string][]string // key → started, unclaimed containers (oldest first)
	busy  map[string]int      // key → containers being made
	// claiming are the containers being renamed right now: no longer ready, not yet claimed.
	claiming map[string]bool
	made     map[string]made      // ready or being claimed container → how it was made
	specs    map[string]poolEntry // key → what to keep warm
}

type made struct {
	at   time.Time
	spec sandbox.Spec
}

type poolEntry struct {
	spec     sandbox.Spec // without a name or session
	seen     time.Time
	keepWarm bool // the default spec, warm whether seen or not
}

func newPool(p *Provider, size int, logger *slog.Logger) *pool {
	var id [8]byte
	_, _ = rand.Read(id[:])
	pl := &pool{p: p, size: size, owner: hex.EncodeToString(id[:]), logger: logger, wake: make(chan struct{}, 1),
		ready: map[string][]string{}, busy: map[string]int{}, claiming: map[string]bool{}, made: map[string]made{}, specs: map[string]poolEntry{}}
	def := template(sandbox.SpecFor("", wire.EnvironmentConfig{Type: "cloud"}))
	pl.specs[pl.key(def)] = poolEntry{spec: def, keepWarm: true}
	return pl
}

// template is a spec with the session left out: what the pool makes containers of.
func template(spec sandbox.Spec) sandbox.Spec {
	spec.Name, spec.SessionID = "", ""
	return spec
}

func (pl *pool) key(spec sandbox.Spec) string { return pl.p.baseImage(spec) + " " + spec.Hash() }

// Start implements startstop.Service.
func (pl *pool) Start(ctx context.Context) error {
	pl.loop.Start(ctx, pl.run)
	return nil
}

// Stop implements startstop.Service: the refill ends and the unclaimed containers go.
func (pl *pool) Stop() {
	pl.loop.Stop()
	pl.mu.Lock()
	var names []string
	for k, list := range pl.ready {
		names = append(names, list...)
		delete(pl.ready, k)
	}
	pl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range names {
		pl.remove(ctx, n)
	}
	pl.removeLeftovers(ctx)
}

// removeLeftovers removes this owner's unclaimed containers the pool lost track of and its
// volumes no container uses (dangling): never a claimed container or its workspace.
func (pl *pool) removeLeftovers(ctx context.Context) {
	owned := client.Filters{}.Add("label", LabelPool+"="+pl.owner)
	if res, err := pl.p.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: owned}); err == nil {
		for _, c := range res.Items {
			for _, n := range c.Names {
				if n = strings.TrimPrefix(n, "/"); strings.HasPrefix(n, poolPrefix) && !pl.beingClaimed(n) {
					pl.remove(ctx, n)
				}
			}
		}
	}
	if res, err := pl.p.engine.VolumeList(ctx, client.VolumeListOptions{Filters: owned.Add("dangling", "true")}); err == nil {
		for _, v := range res.Items {
			if strings.HasPrefix(v.Name, poolPrefix) {
				_ = pl.p.removeWorkspace(ctx, v.Name, false)
			}
		}
	}
}

func (pl *pool) beingClaimed(name string) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.claiming[name]
}

func (pl *pool) signal() {
	select {
	case pl.wake <- struct{}{}:
	default:
	}
}

func (pl *pool) run(ctx context.Context) {
	tick := time.NewTicker(poolTick)
	defer tick.Stop()
	pl.reconcile(ctx)
	for {
		pl.refill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			pl.reconcile(ctx)
		case <-pl.wake:
		}
	}
}

// seen records that a session of spec is being created, so its environment is kept warm.
func (pl *pool) seen(spec sandbox.Spec) {
	t := template(spec)
	k := pl.key(t)
	pl.mu.Lock()
	e, ok := pl.specs[k]
	if !ok {
		e = poolEntry{spec: t}
	}
	e.seen = time.Now()
	pl.specs[k] = e
	// Forget the environments not seen for longest beyond the bound.
	var recent []string
	for k, e := range pl.specs {
		if !e.keepWarm {
			recent = append(recent, k)
		}
	}
	slices.SortFunc(recent, func(a, b string) int { return pl.specs[b].seen.Compare(pl.specs[a].seen) })
	for _, k := range recent[min(len(recent), poolRecentSpecs):] {
		delete(pl.specs, k)
	}
	pl.mu.Unlock()
	pl.signal()
}

// refill makes containers, one at a time, until every warm key has size of them.
func (pl *pool) refill(ctx context.Context) {
	for ctx.Err() == nil {
		k, spec, ok := pl.next()
		if !ok {
			return
		}
		name, err := pl.make(ctx, spec)
		pl.mu.Lock()
		pl.busy[k]--
		if err == nil {
			pl.ready[k] = append(pl.ready[k], name)
			pl.made[name] = made{at: time.Now(), spec: spec}
		}
		pl.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				pl.logger.WarnContext(ctx, "warm pool: could not make a container; retrying later", "spec_hash", spec.Hash(), "error", err)
			}
			return // the next tick tries again
		}
	}
}

// next picks a key short of containers and reserves one slot of it.
func (pl *pool) next() (string, sandbox.Spec, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(pl.specs)) {
		e := pl.specs[k]
		if !e.keepWarm && time.Since(e.seen) > poolRecentFor {
			delete(pl.specs, k)
			continue
		}
		if len(pl.ready[k])+pl.busy[k] < pl.size {
			pl.busy[k]++
			return k, e.spec, true
		}
	}
	return "", sandbox.Spec{}, false
}

// make creates and starts one pool container of spec.
func (pl *pool) make(ctx context.Context, spec sandbox.Spec) (string, error) {
	image, err := pl.p.sessionImage(ctx, spec)
	if err != nil {
		return "", err
	}
	info, err := pl.p.engine.ImageInspect(ctx, image)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", image, err)
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	name := poolPrefix + hex.EncodeToString(id[:])
	if err := pl.p.ensureRunner(ctx, image); err != nil {
		return "", err
	}
	// A create the engine has received finishes even if the call is cancelled, so a Stop that
	// cancelled it mid-way found no container to remove and the engine made one after: a
	// container nobody owned. From here on the calls are not cancelled (only bounded), and
	// what they made is ready for Stop, which waits for the refill, to remove.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), poolMakeTimeout)
	defer cancel()
	opts := pl.p.CreateOptions(spec)
	opts.Name = name
	opts.Config.Image = image
	labels := map[string]string{
		LabelSandbox: "pool", LabelPool: pl.owner, LabelSpecHash: spec.Hash(),
		LabelDeployment: pl.p.cfg.Deployment, LabelPoolImage: info.ID,
	}
	opts.Config.Labels = labels
	for i := range opts.HostConfig.Mounts {
		if opts.HostConfig.Mounts[i].Target == Workspace {
			opts.HostConfig.Mounts[i].Source = volumeName(name)
			opts.HostConfig.Mounts[i].VolumeOptions = pl.p.workspaceVolumeOptions(volumeName(name))
		}
	}
	if err := pl.p.createWorkspace(ctx, volumeName(name), pl.p.diskSize(spec), labels); err != nil {
		pl.discard(name)
		return "", fmt.Errorf("create pool workspace: %w", err)
	}
	if _, err := pl.p.engine.ContainerCreate(ctx, opts); err != nil {
		pl.discard(name)
		return "", fmt.Errorf("create pool container: %w", err)
	}
	if _, err := pl.p.engine.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		pl.discard(name)
		return "", fmt.Errorf("start pool container: %w", err)
	}
	return name, nil
}

// discard removes what a make that failed (or was canceled by Stop) may have left: the
// container (the engine may have made it though the call failed) and its volume. Nothing
// else knows the random name, so neither can be a session's.
func (pl *pool) discard(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = pl.p.engine.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
	_ = pl.p.removeWorkspace(ctx, volumeName(name), true)
}

// remove force-removes a pool container and its workspace volume. A container no longer
// found by its pool name may have been claimed (renamed) meanwhile: its volume is a
// session's workspace then, and stays.
func (pl *pool) remove(ctx context.Context, name string) {
	if _, err := pl.p.engine.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil {
		if !cerrdefs.IsNotFound(err) {
			pl.logger.WarnContext(ctx, "warm pool: could not remove a container", "container", name, "error", err)
		}
		return
	}
	if err := pl.p.removeWorkspace(ctx, volumeName(name), true); err != nil {
		pl.logger.WarnContext(ctx, "warm pool: could not remove a workspace", "volume", volumeName(name), "error", err)
	}
}

// claim gives the session of spec a pool container by renaming it to name: true if it did,
// false if the pool had none (or lost a race for the name: the caller then creates or
// adopts as without a pool).
func (pl *pool) claim(ctx context.Context, spec sandbox.Spec, name string) (bool, error) {
	if spec.Egress.Mode == sandbox.EgressHosts {
		// Such a sandbox sits on a network of its own, made under its final name, with proxy
		// credentials signed for that name: nothing a container made in advance can have.
		return false, nil
	}
	pl.seen(spec)
	k := pl.key(spec)
	for {
		pl.mu.Lock()
		list := pl.ready[k]
		if len(list) == 0 {
			pl.mu.Unlock()
			return false, nil
		}
		candidate := list[0]
		pl.ready[k] = list[1:]
		if time.Since(pl.made[candidate].at) > poolMaxAge/2 {
			delete(pl.made, candidate)
			// Other workers remove it at poolMaxAge: too close to claim. The reconcile
			// removes it, as one this pool no longer knows.
			pl.mu.Unlock()
			continue
		}
		pl.claiming[candidate] = true
		pl.mu.Unlock()

		_, err := pl.p.engine.ContainerRename(ctx, candidate, client.ContainerRenameOptions{NewName: name})
		pl.mu.Lock()
		delete(pl.claiming, candidate)
		if err == nil || cerrdefs.IsNotFound(err) {
			delete(pl.made, candidate)
		}
		pl.mu.Unlock()
		switch {
		case err == nil:
			pl.signal()
			return true, pl.p.writeClaim(ctx, spec, name, volumeName(candidate))
		case cerrdefs.IsNotFound(err):
			continue // removed behind the pool's back (a stale sweep): try the next
		case cerrdefs.IsConflict(err):
			// A concurrent Create of this name won; the container is still the pool's.
			pl.putBack(k, candidate)
			return false, nil
		default:
			pl.putBack(k, candidate)
			return false, fmt.Errorf("claim pool container %s as %s: %w", candidate, name, err)
		}
	}
}

func (pl *pool) putBack(k, name string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.ready[k] = append([]string{name}, pl.ready[k]...)
}

// reconcile drops from the pool what the engine no longer has, and removes pool containers
// that are stale: this owner's made from an image that has changed since, anyone's older than
// poolMaxAge (a worker that died leaves them), and unclaimed ones of this owner the pool does
// not know (a claim whose rename failed halfway).
func (pl *pool) reconcile(ctx context.Context) {
	res, err := pl.p.engine.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", LabelPool).Add("label", LabelDeployment+"="+pl.p.cfg.Deployment),
	})
	if err != nil {
		pl.logger.WarnContext(ctx, "warm pool: could not list pool containers", "error", err)
		return
	}
	// The id of the image a spec's sessions start from now; "" if it cannot be told (then the
	// container is kept: the claim's session would find out).
	current := map[string]string{}
	imageID := func(spec sandbox.Spec) string {
		image, err := pl.p.sessionImage(ctx, spec)
		if err != nil {
			return ""
		}
		if id, ok := current[image]; ok {
			return id
		}
		info, err := pl.p.engine.ImageInspect(ctx, image)
		if err != nil {
			return ""
		}
		current[image] = info.ID
		return info.ID
	}
	pl.mu.Lock()
	specs := map[string]sandbox.Spec{}
	for n, m := range pl.made {
		specs[n] = m.spec
	}
	known := map[string]bool{} // ready or being claimed
	for _, list := range pl.ready {
		for _, n := range list {
			known[n] = true
		}
	}
	for n := range pl.claiming {
		known[n] = true
	}
	busy := 0
	for _, n := range pl.busy {
		busy += n
	}
	pl.mu.Unlock()

	exists := map[string]bool{}
	var stale []string
	for _, c := range res.Items {
		name := ""
		for _, n := range c.Names {
			if n = strings.TrimPrefix(n, "/"); strings.HasPrefix(n, poolPrefix) {
				name = n
			}
		}
		if name == "" {
			continue // claimed: a session's now
		}
		exists[name] = true
		mine := known[name]
		age := time.Since(time.Unix(c.Created, 0))
		switch {
		case age > poolMaxAge:
			stale = append(stale, name)
		case c.Labels[LabelPool] != pl.owner:
		case age > poolMaxAge/2:
			// Recycled well before other workers may remove it (a claim skips it already).
			stale = append(stale, name)
		case !mine:
			if busy == 0 { // else it may be one being made right now
				stale = append(stale, name)
			}
		case c.State != "running":
			stale = append(stale, name)
		case imageID(specs[name]) != "" && c.Labels[LabelPoolImage] != imageID(specs[name]):
			stale = append(stale, name)
		}
	}
	// Under the lock, so a claim cannot take what is about to be removed: a container the
	// snapshot knew that is no longer ready was taken by a claim since, and stays.
	pl.mu.Lock()
	ready := map[string]bool{}
	for _, list := range pl.ready {
		for _, n := range list {
			ready[n] = true
		}
	}
	gone := map[string]bool{}
	stale = slices.DeleteFunc(stale, func(n string) bool { return pl.claiming[n] || (known[n] && !ready[n]) })
	for _, n := range stale {
		gone[n] = true
	}
	for k, list := range pl.ready {
		pl.ready[k] = slices.DeleteFunc(list, func(n string) bool {
			if gone[n] || (known[n] && !exists[n]) {
				delete(pl.made, n)
				return true
			}
			return false
		})
	}
	pl.mu.Unlock()
	for _, n := range stale {
		pl.remove(ctx, n)
		pl.logger.InfoContext(ctx, "warm pool: removed a stale pool container", "container", n)
	}
	pl.removeOldVolumes(ctx)
}

// removeOldVolumes removes pool workspace volumes of any owner that no container has used
// for poolMaxAge: a worker that died between making a volume and its container, or a
// claimed container removed behind the provider's back, leaves them.
func (pl *pool) removeOldVolumes(ctx context.Context) {
	res, err := pl.p.engine.VolumeList(ctx, client.VolumeListOptions{
		Filters: client.Filters{}.Add("label", LabelPool).Add("label", LabelDeployment+"="+pl.p.cfg.Deployment).Add("dangling", "true"),
	})
	if err != nil {
		return
	}
	for _, v := range res.Items {
		created, err := time.Parse(time.RFC3339, v.CreatedAt)
		if err != nil || time.Since(created) < poolMaxAge || !strings.HasPrefix(v.Name, poolPrefix) {
			continue
		}
		if err := pl.p.removeWorkspace(ctx, v.Name, false); err == nil {
			pl.logger.InfoContext(ctx, "warm pool: removed an unused pool volume", "volume", v.Name)
		}
	}
}

// writeClaim records which session a claimed pool container serves and which workspace
// volume it mounts. Every Create that finds the container writes it (a create of an existing
// volume returns it), so a claim whose first response was lost is recorded by the retry.
func (p *Provider) writeClaim(ctx context.Context, spec sandbox.Spec, name, workspace string) error {
	_, err := p.engine.VolumeCreate(ctx, client.VolumeCreateOptions{Name: claimVolume(name), Labels: map[string]string{
		LabelClaim: "1", LabelClaimVol: workspace, LabelSandbox: spec.Name, LabelSession: spec.SessionID, LabelDeployment: p.cfg.Deployment,
	}})
	if err != nil {
		return fmt.Errorf("record the claim of %s: %w", name, err)
	}
	return nil
}

// adoptClaim writes the claim record of an existing container that came from the pool.
func (p *Provider) adoptClaim(ctx context.Context, spec sandbox.Spec, name string, info client.ContainerInspectResult) error {
	if info.Container.Config == nil || info.Container.Config.Labels[LabelPool] == "" {
		return nil
	}
	for _, m := range info.Container.Mounts {
		if m.Destination == Workspace {
			return p.writeClaim(ctx, spec, name, m.Name)
		}
	}
	return nil
}

// destroyClaim removes a claimed container's pool workspace volume and its claim record.
func (p *Provider) destroyClaim(ctx context.Context, name string) error {
	info, err := p.engine.VolumeInspect(ctx, claimVolume(name), client.VolumeInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect the claim of %s: %w", name, err)
	}
	if ws := info.Volume.Labels[LabelClaimVol]; strings.HasPrefix(ws, poolPrefix) {
		if err := p.removeWorkspace(ctx, ws, true); err != nil {
			return fmt.Errorf("destroy workspace of %s: %w", name, err)
		}
	}
	if _, err := p.engine.VolumeRemove(ctx, claimVolume(name), client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the claim of %s: %w", name, err)
	}
	return nil
}

// claimedSessions maps the containers claimed from a pool to their sessions.
func (p *Provider) claimedSessions(ctx context.Context) (map[string]string, error) {
	res, err := p.engine.VolumeList(ctx, client.VolumeListOptions{
		Filters: client.Filters{}.Add("label", LabelClaim).Add("label", LabelDeployment+"="+p.cfg.Deployment),
	})
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	out := map[string]string{}
	for _, v := range res.Items {
		if name, ok := strings.CutSuffix(v.Name, "-claim"); ok {
			out[name] = v.Labels[LabelSession]
		}
	}
	return out, nil
}

// WarmPool is the background part of the warm pool, to run as long as the provider is used:
// Start begins refilling, Stop ends it and removes the unclaimed containers. Without a pool
// (Config.WarmPool 0) it does nothing. A non-nil logger replaces Config.Logger for the
// pool's reports; call it before Start.
func (p *Provider) WarmPool(logger *slog.Logger) startstop.Service {
	if p.pool == nil {
		return noPool{}
	}
	if logger != nil {
		p.pool.logger = logger
	}
	return p.pool
}

type noPool struct{}

func (noPool) Start(context.Context) error { return nil }
func (noPool) Stop()                       {}
