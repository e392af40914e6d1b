package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// The runner is the managed-agents binary itself, served to every container on a read-only
// volume at RunnerDir: the provider runs `managed-agents sandboxd --stdio` in the container
// with one `docker exec` per connection (conn.go) and then sends each command, read, write
// or search as a request on that kept-alive connection. An exec costs the engine some 50 ms
// (runc joins the container's namespaces and cgroups); a request on an open connection costs
// what the command itself costs. The volume is named after the binary's digest, so workers
// of one version share it and an upgrade brings its own.
const (
	// RunnerDir is where the runner volume is mounted in every sandbox container.
	RunnerDir = "/opt/managed-agents"
	// runnerPath is the runner inside the container.
	runnerPath = RunnerDir + "/managed-agents"
	// LabelRunner is on the runner volumes: the binary's digest.
	LabelRunner = "managed-agents.runner"
)

// runner is the binary the containers run, as found on this machine.
type runner struct {
	path   string
	digest string // sha256, hex
	size   int64
	static bool // no ELF interpreter: runs in any image of its architecture
}

// volume is the runner volume's name: one per binary.
func (r runner) volume() string { return "ma-runner-" + r.digest[:24] }

// defaultRunner is the binary a provider runs when its configuration names none: the
// running executable (a worker's own binary). Tests, whose executable is a test binary,
// replace it (export_test.go).
var defaultRunner = os.Executable

// runnerCache remembers the digest of each binary by path, size and modification time, so
// providers made in one process hash a binary once.
var runnerCache struct {
	sync.Mutex
	m map[runnerKey]runner
}

type runnerKey struct {
	path  string
	size  int64
	mtime time.Time
}

// loadRunner checks that path is a Linux executable the containers can run and digests it.
func loadRunner(path string) (runner, error) {
	if path == "" {
		exe, err := defaultRunner()
		if err != nil {
			return runner{}, fmt.Errorf("docker sandbox runner: find this executable (set MANAGED_AGENT_DOCKER_RUNNER): %w", err)
		}
		path = exe
	}
	info, err := os.Stat(path)
	if err != nil {
		return runner{}, fmt.Errorf("docker sandbox runner (MANAGED_AGENT_DOCKER_RUNNER): %w", err)
	}
	key := runnerKey{path: path, size: info.Size(), mtime: info.ModTime()}
	runnerCache.Lock()
	defer runnerCache.Unlock()
	if r, ok := runnerCache.m[key]; ok {
		return r, nil
	}
	r, err := inspectRunner(path)
	if err != nil {
		return runner{}, err
	}
	if runnerCache.m == nil {
		runnerCache.m = map[runnerKey]runner{}
	}
	runnerCache.m[key] = r
	return r, nil
}

func inspectRunner(path string) (runner, error) {
	bin, err := elf.Open(path)
	if err != nil {
		return runner{}, fmt.Errorf("docker sandbox runner %s (MANAGED_AGENT_DOCKER_RUNNER) is not a Linux executable: build one with GOOS=linux CGO_ENABLED=0 go build: %w", path, err)
	}
	static := true
	for _, prog := range bin.Progs {
		if prog.Type == elf.PT_INTERP {
			static = false
		}
	}
	machine := bin.Machine
	_ = bin.Close()
	if want := elfMachine(); want != elf.EM_NONE && machine != want {
		return runner{}, fmt.Errorf("docker sandbox runner %s (MANAGED_AGENT_DOCKER_RUNNER) is built for %s, not %s", path, machine, runtime.GOARCH)
	}
	f, err := os.Open(path)
	if err != nil {
		return runner{}, fmt.Errorf("docker sandbox runner (MANAGED_AGENT_DOCKER_RUNNER): %w", err)
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return runner{}, fmt.Errorf("docker sandbox runner %s: %w", path, err)
	}
	return runner{path: path, digest: hex.EncodeToString(h.Sum(nil)), size: size, static: static}, nil
}

// elfMachine is this process's architecture in ELF terms: the engine is assumed to run the
// same (EM_NONE where unknown: not checked).
func elfMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// runnerState is the provider's runner and whether its volume is known to hold it.
type runnerState struct {
	bin   runner
	mu    sync.Mutex
	ready bool
}

// ensureRunner makes sure the engine has the runner volume with this binary in it, filling
// it through a container that is created, never started, from image (any image will do:
// the copy goes into the volume, and nothing of the image does). The volume's content can
// only come from this copy: sandboxes mount it read-only, the fill container never runs.
// Once per provider, then a cheap check that the volume is still there.
//
// Workers filling one new volume take turns (lockRunnerVolume). The volumes of earlier
// versions stay until removed (`docker volume prune`, or `docker volume rm` of the
// ma-runner-* volumes no container uses).
func (p *Provider) ensureRunner(ctx context.Context, image string) error {
	st := p.runner
	st.mu.Lock()
	defer st.mu.Unlock()
	name := st.bin.volume()
	if st.ready {
		// Still there? A volume nothing uses can be pruned under a running worker; the
		// engine would then mount an empty one of that name.
		if _, err := p.engine.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil {
			return nil
		} else if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("inspect the runner volume %s: %w", name, err)
		}
		st.ready = false
	}
	labels := map[string]string{LabelRunner: st.bin.digest}
	if _, err := p.engine.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: labels}); err != nil {
		return fmt.Errorf("create the runner volume %s: %w", name, err)
	}
	fill, err := p.lockRunnerVolume(ctx, name, image, labels)
	if err != nil {
		return err
	}
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = p.engine.ContainerRemove(rmCtx, fill, client.ContainerRemoveOptions{Force: true})
	}()
	if stat, err := p.engine.ContainerStatPath(ctx, fill, client.ContainerStatPathOptions{Path: runnerPath}); err == nil && stat.Stat.Size == st.bin.size {
		st.ready = true
		return nil
	}
	if err := p.copyRunner(ctx, fill); err != nil {
		return fmt.Errorf("fill the runner volume %s: %w", name, err)
	}
	st.ready = true
	return nil
}

// fillStale is how old a fill container must be to be taken for a crashed worker's.
const fillStale = 2 * time.Minute

// lockRunnerVolume creates the volume's fill container, whose fixed name makes it a lock
// across workers and processes on one engine: whoever creates it checks and fills the
// volume, the others wait for it to be removed. Without it, a second filler would rewrite a
// binary that containers already run ("text file busy"). A fill container older than
// fillStale is a crashed worker's and is removed.
func (p *Provider) lockRunnerVolume(ctx context.Context, volume, image string, labels map[string]string) (string, error) {
	name := volume + "-fill"
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		_, err := p.engine.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:   name,
			Config: &container.Config{Image: image, Labels: labels, Entrypoint: []string{runnerPath}},
			HostConfig: &container.HostConfig{
				NetworkMode: "none",
				LogConfig:   container.LogConfig{Type: "none"},
				// NoCopy: the image's own /opt/managed-agents (a package image's, say, which a
				// user's installer wrote) must never seed the volume every sandbox runs from.
				Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: RunnerDir, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}},
			},
		})
		switch {
		case err == nil:
			return name, nil
		case cerrdefs.IsNotFound(err):
			return "", fmt.Errorf("fill the runner volume: image %s not found (run make sandbox-image, or set MANAGED_AGENT_DOCKER_IMAGE): %w", image, err)
		case !cerrdefs.IsConflict(err):
			return "", fmt.Errorf("fill the runner volume %s: %w", volume, err)
		}
		if info, err := p.engine.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err == nil {
			if created, perr := time.Parse(time.RFC3339Nano, info.Container.Created); perr == nil && time.Since(created) > fillStale {
				_, _ = p.engine.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("fill the runner volume %s: another worker is filling it: %w", volume, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// copyRunner copies the binary into the volume as RunnerDir/managed-agents, owned by root,
// mode 0755.
func (p *Provider) copyRunner(ctx context.Context, containerID string) error {
	f, err := os.Open(p.runner.bin.path)
	if err != nil {
		return fmt.Errorf("open the runner: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "managed-agents", Mode: 0o755, Size: p.runner.bin.size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.CopyN(tw, f, p.runner.bin.size)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err = p.engine.CopyToContainer(ctx, containerID, client.CopyToContainerOptions{DestinationPath: RunnerDir, Content: pr})
	_ = pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("copy the runner: %w", err)
	}
	return nil
}
