package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/packages"
)

// An environment's packages are installed by the worker, through sandboxd, once the pod is
// Ready: the worker already talks to sandboxd, and an install (minutes) has no place in a
// reconcile. They run as the sandbox's own non-root user (the restricted profile allows no
// other), into the pod's packages emptyDir, which sandboxd points every command at
// (packages.UserEnv): so apt, which needs root, is refused before anything is made. The
// network is the sandbox's own: its egress (through the proxy under a hosts policy) is what
// the installers get, the package registries among it when the environment allows package
// managers. Unlike docker, nothing is cached per environment: each pod installs.
//
// Exactly once per sandbox: the last step writes the packages' key to a marker file in the
// packages directory, and a Create that adopts a binding (a retried acquisition) finds it
// and installs nothing. A retry that comes before the marker runs the managers again over
// what the lost attempt installed, which they treat as installed.

// DefaultPackageTimeout bounds the install of one sandbox's packages.
const DefaultPackageTimeout = 5 * time.Minute

// ErrPackages marks a failed install of an environment's packages: permanent (retrying runs
// the same installer on the same input), and its message carries the installer's output.
var ErrPackages = fmt.Errorf("%w: installing the environment's packages failed", sandbox.ErrSetup)

// installedMarker, in the packages directory, holds the key of the packages installed there.
const installedMarker = ".installed"

// noPackagesDirExit is how the marker check tells a pod whose sandboxd knows no packages directory: one made by a
// controller older than this worker.
const noPackagesDirExit = 3

// installOutputMax is what an install command's output is read up to: the script prints
// only the tail of the installer's log.
const installOutputMax = 64 << 10

// installPackages installs pkgs in sb unless the marker says they are.
func (p *Provider) installPackages(ctx context.Context, sb sandbox.Sandbox, pkgs map[string][]string) error {
	key := packages.Key(pkgs)
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command:   fmt.Sprintf(`[ -n "$%[1]s" ] || exit %[2]d; cat "$%[1]s/%[3]s" 2>/dev/null; exit 0`, packages.DirVar, noPackagesDirExit, installedMarker),
		Timeout:   time.Minute,
		MaxOutput: 4 << 10,
	})
	switch {
	case err != nil:
		return fmt.Errorf("read the packages marker: %w", err)
	case res.ExitCode == noPackagesDirExit:
		return fmt.Errorf("%w: the sandbox pod has no packages directory (%s): its SandboxBinding controller is older than this worker", ErrPackages, packages.DirVar)
	case res.ExitCode != 0:
		return fmt.Errorf("%w: reading the packages marker exited with status %d: %s", ErrPackages, res.ExitCode, res.Output)
	case strings.TrimSpace(string(res.Output)) == key:
		return nil
	}
	deadline := time.Now().Add(p.cfg.PackageTimeout)
	for _, m := range packages.Managers(pkgs) {
		// sandboxd keeps the head of an output; what says why an install failed is its end.
		script := `log="$` + packages.DirVar + `/.install.log"; ` + packages.ShellQuote(packages.Command(packages.User, m, pkgs[m])) +
			` >"$log" 2>&1; s=$?; tail -c 8192 "$log" 2>/dev/null || cat "$log"; rm -f "$log"; exit $s`
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: script, Timeout: time.Until(deadline), MaxOutput: installOutputMax})
		if err != nil {
			return fmt.Errorf("install the %s packages: %w", m, err)
		}
		var tail packages.Tail
		_, _ = tail.Write(res.Output)
		switch {
		case res.TimedOut || time.Until(deadline) <= 0:
			return fmt.Errorf("%w: installing the %s packages took longer than %s (MANAGED_AGENT_KUBERNETES_PACKAGE_TIMEOUT); the installer's output ends with:\n%s", ErrPackages, m, p.cfg.PackageTimeout, tail.String())
		case res.ExitCode != 0:
			return fmt.Errorf("%w: the %s installer exited with status %d; its output ends with:\n%s", ErrPackages, m, res.ExitCode, tail.String())
		}
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{
		Command: fmt.Sprintf(`printf '%%s\n' %s >"$%s/%s"`, key, packages.DirVar, installedMarker), Timeout: time.Minute, MaxOutput: 4 << 10,
	})
	switch {
	case err != nil:
		return fmt.Errorf("write the packages marker: %w", err)
	case res.ExitCode != 0:
		return fmt.Errorf("%w: writing the packages marker exited with status %d: %s", ErrPackages, res.ExitCode, res.Output)
	}
	return nil
}

// setUp installs spec's packages into the Ready sandbox ref names. An install that fails
// for good deletes the binding and says why (sandbox.ErrSetup); one cut short by the caller
// or by a transport failure keeps it for the retried acquisition to adopt.
func (p *Provider) setUp(ctx context.Context, ref sandbox.Ref, spec sandbox.Spec) error {
	sb, err := p.Attach(ctx, ref)
	if err == nil {
		err = p.installPackages(ctx, sb, spec.Packages)
	}
	if err == nil || ctx.Err() != nil || !errors.Is(err, ErrPackages) {
		return err
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if derr := p.Destroy(cleanup, ref); derr != nil {
		return fmt.Errorf("%w (and deleting the sandbox failed: %v)", err, derr)
	}
	return err
}
