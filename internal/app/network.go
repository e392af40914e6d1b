package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/managed-agents/managed-agents/internal/egress"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
)

// NetworkConfig is the sandbox networking configuration (docs/sandbox-networking.md): the
// deployment's ceiling, the docker topology and the egress proxy.
type NetworkConfig struct {
	// Ceiling is none (default), allowlist or full (MANAGED_AGENT_SANDBOX_NETWORK).
	Ceiling string
	// AllowedHosts is the deployment's allowlist under allowlist
	// (MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS, comma- or space-separated patterns).
	AllowedHosts string
	// PackageHosts replaces sandbox.DefaultPackageHosts (MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS).
	PackageHosts string
	// DockerNetwork is the network of full sandboxes and the proxy's way out
	// (MANAGED_AGENT_DOCKER_NETWORK, default bridge).
	DockerNetwork string
	// EgressImage is the proxy container's image (MANAGED_AGENT_DOCKER_EGRESS_IMAGE).
	EgressImage string
	// EgressKey or EgressKeyFile hold the key that signs sandbox proxy credentials
	// (MANAGED_AGENT_EGRESS_PROXY_KEY, MANAGED_AGENT_EGRESS_PROXY_KEY_FILE).
	EgressKey, EgressKeyFile string
	// EgressAddr is the listen address of `egress-proxy` (MANAGED_AGENT_EGRESS_PROXY_ADDR,
	// default :3128).
	EgressAddr string
	// EgressPorts are the destination ports the proxy allows (MANAGED_AGENT_EGRESS_PROXY_PORTS,
	// default 80,443).
	EgressPorts string
}

// DefaultEgressAddr is where `egress-proxy` listens by default.
const DefaultEgressAddr = ":3128"

func networkFromLookup(n NetworkConfig, get func(string) string) NetworkConfig {
	set := func(dst *string, name string) {
		if v := get(name); v != "" {
			*dst = v
		}
	}
	set(&n.Ceiling, "MANAGED_AGENT_SANDBOX_NETWORK")
	set(&n.AllowedHosts, "MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS")
	set(&n.PackageHosts, "MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS")
	set(&n.DockerNetwork, "MANAGED_AGENT_DOCKER_NETWORK")
	set(&n.EgressImage, "MANAGED_AGENT_DOCKER_EGRESS_IMAGE")
	set(&n.EgressKey, "MANAGED_AGENT_EGRESS_PROXY_KEY")
	set(&n.EgressKeyFile, "MANAGED_AGENT_EGRESS_PROXY_KEY_FILE")
	set(&n.EgressAddr, "MANAGED_AGENT_EGRESS_PROXY_ADDR")
	set(&n.EgressPorts, "MANAGED_AGENT_EGRESS_PROXY_PORTS")
	return n
}

func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// ceiling parses the ceiling variables; every problem names its variable.
func (n NetworkConfig) ceiling() (sandbox.Ceiling, error) {
	c := sandbox.Ceiling{Mode: strings.ToLower(n.Ceiling), AllowedHosts: splitList(n.AllowedHosts)}
	if n.PackageHosts != "" {
		c.PackageHosts = splitList(n.PackageHosts)
	}
	var errs []error
	switch c.Mode {
	case "", sandbox.CeilingNone, sandbox.CeilingAllowlist, sandbox.CeilingFull:
	default:
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_NETWORK=%q: must be none, allowlist or full", n.Ceiling))
	}
	for _, v := range []struct {
		name  string
		hosts []string
	}{{"MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS", c.AllowedHosts}, {"MANAGED_AGENT_SANDBOX_PACKAGE_HOSTS", c.PackageHosts}} {
		for _, h := range v.hosts {
			if !sandbox.ValidPattern(h) {
				errs = append(errs, fmt.Errorf("%s: %q must be a host name, an IP address or a *.domain wildcard (no scheme, port or path)", v.name, h))
			}
		}
	}
	if len(c.AllowedHosts) > 0 && c.Mode != sandbox.CeilingAllowlist {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_SANDBOX_ALLOWED_HOSTS applies only with MANAGED_AGENT_SANDBOX_NETWORK=allowlist (it is %q)", orDefault(n.Ceiling, sandbox.CeilingNone)))
	}
	return c, errors.Join(errs...)
}

// ports parses MANAGED_AGENT_EGRESS_PROXY_PORTS (nil: the proxy's defaults).
func (n NetworkConfig) ports() ([]int, error) {
	var ports []int
	for _, f := range splitList(n.EgressPorts) {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("MANAGED_AGENT_EGRESS_PROXY_PORTS=%q: must be TCP ports (1-65535) separated by commas, such as 80,443", n.EgressPorts)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// key returns the proxy key from the variable or the file ("" when neither is set).
func (n NetworkConfig) key() (string, error) {
	return secretOrFile("MANAGED_AGENT_EGRESS_PROXY_KEY", n.EgressKey, n.EgressKeyFile, "key", egress.MinKeyBytes)
}

var networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// validate checks every networking variable.
func (n NetworkConfig) validate() error {
	_, err := n.ceiling()
	errs := []error{err}
	_, err = n.ports()
	errs = append(errs, err)
	_, err = n.key()
	errs = append(errs, err)
	if n.DockerNetwork != "" && !networkName.MatchString(n.DockerNetwork) {
		errs = append(errs, fmt.Errorf("MANAGED_AGENT_DOCKER_NETWORK=%q: must be a docker network name (letters, digits, '_', '.', '-')", n.DockerNetwork))
	}
	errs = append(errs, validateHostPort("MANAGED_AGENT_EGRESS_PROXY_ADDR", n.EgressAddr))
	return errors.Join(errs...)
}

// dockerNetwork is the docker provider's part (Validate has checked it).
func (n NetworkConfig) dockerNetwork() (docker.NetworkConfig, error) {
	ports, err := n.ports()
	if err != nil {
		return docker.NetworkConfig{}, err
	}
	key, err := n.key()
	if err != nil {
		return docker.NetworkConfig{}, err
	}
	// Sorted and unique: the proxy container's settings hash must not depend on the spelling.
	slices.Sort(ports)
	return docker.NetworkConfig{Network: n.DockerNetwork, ProxyImage: n.EgressImage, ProxyKey: key, ProxyPorts: slices.Compact(ports)}, nil
}

// warn logs what a worker's networking cannot keep: the local provider enforces no ceiling,
// and a generated proxy key dies with the proxy container.
func (n NetworkConfig) warn(provider string, c sandbox.Ceiling, logger *slog.Logger) {
	if c.Mode == "" || c.Mode == sandbox.CeilingNone {
		return
	}
	switch orDefault(provider, defaultSandbox) {
	case "local":
		logger.Warn("the local sandbox enforces no network ceiling: its commands have this machine's network",
			"MANAGED_AGENT_SANDBOX_NETWORK", c.Mode)
	case "docker":
		if key, _ := n.key(); key == "" {
			logger.Warn("no MANAGED_AGENT_EGRESS_PROXY_KEY: the egress proxy keeps the key it was started with; if its container is removed, sandboxes made before lose their egress")
		}
	}
}

// RunEgressProxy runs the allowlisting egress proxy of sandboxes until ctx ends. The docker
// provider starts it in a container of its own; a deployment may also run it itself (the
// Kubernetes provider will).
func RunEgressProxy(ctx context.Context, cfg Config, version string) error {
	logger, err := start(cfg)
	if err != nil {
		return err
	}
	key, err := cfg.Network.key()
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("MANAGED_AGENT_EGRESS_PROXY_KEY or MANAGED_AGENT_EGRESS_PROXY_KEY_FILE is required: the key that signs sandbox proxy credentials (e.g. openssl rand -hex 32)")
	}
	ports, err := cfg.Network.ports()
	if err != nil {
		return err
	}
	p, err := egress.New(egress.Config{Key: []byte(key), Ports: ports, Logger: logger})
	if err != nil {
		return err
	}
	addr := orDefault(cfg.Network.EgressAddr, DefaultEgressAddr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (MANAGED_AGENT_EGRESS_PROXY_ADDR): %w", addr, err)
	}
	logger.Info("egress proxy listening", "addr", ln.Addr().String(), "ports", cfg.Network.EgressPorts, "version", version)
	return p.Serve(ctx, ln)
}
