package docker

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/egress"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// Networking (docs/sandbox-networking.md). A sandbox's effective egress (sandbox.Egress)
// decides its network:
//
//   - none: network mode none, only a loopback interface.
//   - full: the deployment's network (NetworkConfig.Network, default the engine's bridge).
//   - hosts: a network of its own, created Internal (no route out of it), shared only with
//     the deployment's egress proxy container, which is also on the deployment's network.
//     The sandbox's HTTP_PROXY/HTTPS_PROXY variables carry credentials that sign its host
//     list (package egress), so the one proxy serves every sandbox and keeps no state.
//
// A network per session, not one shared internal network: sandboxes on a shared network
// could reach each other's ports. The cost is one engine network per running hosts-policy
// sandbox, which the engine's address pools bound (docs/sandbox-networking.md says how to
// widen them).

// Defaults of NetworkConfig.
const (
	DefaultNetwork    = "bridge"
	DefaultProxyImage = "managed-agents-egress:dev"
	// ProxyAlias is the proxy's name on every session network.
	ProxyAlias = "egress-proxy"
	// ProxyPort is the port the proxy listens on inside its container.
	ProxyPort = 3128
)

// Labels of the egress resources.
const (
	// LabelRole tells a session network and the proxy container from sandbox containers.
	LabelRole = "managed-agents.role"
	// LabelProxyConfig is a hash of the proxy container's settings: a worker replaces a proxy
	// whose settings differ from its own.
	LabelProxyConfig = "managed-agents.egress-proxy-config"

	roleSessionNetwork = "session-network"
	roleProxy          = "egress-proxy"
)

// optInhibitIPv4 is the bridge driver's option that gives the host no address on a network.
const optInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// proxyKeyVar is how the proxy container gets its key; a worker without a key of its own
// adopts the running proxy's from there.
const proxyKeyVar = "MANAGED_AGENT_EGRESS_PROXY_KEY"

// NetworkConfig is the deployment's docker networking (MANAGED_AGENT_DOCKER_NETWORK,
// MANAGED_AGENT_DOCKER_EGRESS_IMAGE, MANAGED_AGENT_EGRESS_PROXY_KEY(_FILE),
// MANAGED_AGENT_EGRESS_PROXY_PORTS).
type NetworkConfig struct {
	// Network is the engine network of full-egress sandboxes and the proxy's way out.
	Network string
	// ProxyImage runs `/managed-agents egress-proxy` (make egress-image builds it).
	ProxyImage string
	// ProxyKey signs sandbox credentials. Empty: the running proxy's key is adopted, or a
	// new proxy gets a random one.
	ProxyKey string
	// ProxyPorts are the destination ports the proxy allows (empty: egress.DefaultPorts).
	ProxyPorts []int
}

func (c NetworkConfig) withDefaults() NetworkConfig {
	c.Network = cmp.Or(c.Network, DefaultNetwork)
	c.ProxyImage = cmp.Or(c.ProxyImage, DefaultProxyImage)
	return c
}

// egressState is the provider's view of the proxy container.
type egressState struct {
	mu  sync.Mutex
	key string // the running proxy's key, once ensureProxy ran
}

// ProxyName is the deployment's egress proxy container.
func (p *Provider) ProxyName() string { return "ma-egress-" + p.cfg.Deployment }

// sessionNetwork is the internal network of a hosts-policy sandbox.
func sessionNetwork(containerName string) string { return containerName + "-net" }

// networkMode is where CreateOptions puts a sandbox; Create replaces a session network's
// name with its id.
func (p *Provider) networkMode(spec sandbox.Spec, name string) container.NetworkMode {
	switch spec.Egress.Mode {
	case sandbox.EgressFull:
		return container.NetworkMode(p.cfg.Net.Network)
	case sandbox.EgressHosts:
		return container.NetworkMode(sessionNetwork(name))
	}
	return "none"
}

// proxyEnv are the variables that send a hosts-policy sandbox's HTTP(S) through the proxy,
// in both spellings tools read; nil for other policies.
func (p *Provider) proxyEnv(spec sandbox.Spec, name string, client netip.Prefix) map[string]string {
	if spec.Egress.Mode != sandbox.EgressHosts {
		return nil
	}
	p.egress.mu.Lock()
	key := cmp.Or(p.cfg.Net.ProxyKey, p.egress.key)
	p.egress.mu.Unlock()
	user, password := egress.Credentials([]byte(key), egress.Policy{Sandbox: name, Hosts: spec.Egress.Hosts, Client: client})
	proxy := fmt.Sprintf("http://%s:%s@%s:%d", user, password, ProxyAlias, ProxyPort)
	noProxy := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}
}

// sandboxEnv is the container's environment: the spec's over the base, and the proxy
// variables over both, so an environment cannot point its sandbox elsewhere (it would find
// no route anyway).
func (p *Provider) sandboxEnv(spec sandbox.Spec, name string) []string {
	return p.sandboxEnvFrom(spec, name, netip.Prefix{})
}

// sandboxEnvFrom is sandboxEnv with the proxy credentials bound to the client subnet (the
// session network's), when it is valid.
func (p *Provider) sandboxEnvFrom(spec sandbox.Spec, name string, client netip.Prefix) []string {
	pe := p.proxyEnv(spec, name, client)
	env := spec.Environ(containerEnv())
	if pe == nil {
		return env
	}
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ok := pe[k]
		return ok
	})
	for _, k := range slices.Sorted(maps.Keys(pe)) {
		env = append(env, k+"="+pe[k])
	}
	slices.Sort(env)
	return env
}

// prepareNetwork makes what a sandbox's policy needs before its container is created or
// adopted: under hosts, the proxy and the session network with the proxy on it. It returns
// the session network's id ("" for other policies) and its subnet, which the sandbox's
// proxy credentials are bound to.
func (p *Provider) prepareNetwork(ctx context.Context, spec sandbox.Spec, name string) (string, netip.Prefix, error) {
	if spec.Egress.Mode != sandbox.EgressHosts {
		return "", netip.Prefix{}, nil
	}
	if err := egress.CheckPolicy(egress.Policy{Sandbox: name, Hosts: spec.Egress.Hosts, Client: netip.MustParsePrefix("255.255.255.255/32")}); err != nil {
		return "", netip.Prefix{}, err
	}
	proxyID, err := p.ensureProxy(ctx)
	if err != nil {
		return "", netip.Prefix{}, err
	}
	labels := p.labels(spec)
	labels[LabelRole] = roleSessionNetwork
	netID, err := p.ensureSessionNetwork(ctx, sessionNetwork(name), labels)
	if err != nil {
		return "", netip.Prefix{}, err
	}
	subnet, err := p.connectProxy(ctx, netID, proxyID)
	return netID, subnet, err
}

// reattachNetwork puts the proxy back on an attached sandbox's session network: a proxy
// container recreated since (new settings, removed by hand) is on none of the old ones.
func (p *Provider) reattachNetwork(ctx context.Context, info container.InspectResponse) error {
	if info.NetworkSettings == nil || info.Name == "" {
		return nil
	}
	want := sessionNetwork(strings.TrimPrefix(info.Name, "/"))
	ep, ok := info.NetworkSettings.Networks[want]
	if !ok || ep == nil {
		return nil
	}
	proxyID, err := p.ensureProxy(ctx)
	if err != nil {
		return err
	}
	_, err = p.connectProxy(ctx, ep.NetworkID, proxyID)
	return err
}

// ensureProxy adopts the deployment's proxy container if its settings are this worker's,
// replaces it if they are not, or creates it; it returns the container's id.
func (p *Provider) ensureProxy(ctx context.Context) (string, error) {
	p.egress.mu.Lock()
	defer p.egress.mu.Unlock()
	name := p.ProxyName()
	for attempt := 0; ; attempt++ {
		info, err := p.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		switch {
		case err == nil:
			c := info.Container
			key := p.cfg.Net.ProxyKey
			if key == "" && c.Config != nil {
				key = envValue(c.Config.Env, proxyKeyVar)
			}
			if key != "" && c.Config != nil && c.Config.Labels[LabelProxyConfig] == p.proxyConfigHash(key) {
				if err := p.ensureRunning(ctx, name); err != nil {
					return "", fmt.Errorf("start the egress proxy: %w", err)
				}
				p.egress.key = key
				return c.ID, nil
			}
			// Settings changed (image, key, ports, network): the new proxy joins every session
			// network again below.
			if _, err := p.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				return "", fmt.Errorf("replace the egress proxy %s: %w", name, err)
			}
		case !cerrdefs.IsNotFound(err):
			return "", fmt.Errorf("inspect the egress proxy %s: %w", name, err)
		}
		id, err := p.createProxy(ctx, name)
		if cerrdefs.IsConflict(err) && attempt < 3 {
			continue // another worker created it meanwhile: adopt that one
		}
		return id, err
	}
}

func (p *Provider) createProxy(ctx context.Context, name string) (string, error) {
	key := p.cfg.Net.ProxyKey
	if key == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		key = hex.EncodeToString(b)
	}
	ports := make([]string, len(p.cfg.Net.ProxyPorts))
	for i, port := range p.cfg.Net.ProxyPorts {
		ports[i] = strconv.Itoa(port)
	}
	pids := int64(512)
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:      p.cfg.Net.ProxyImage,
			Entrypoint: []string{"/managed-agents"},
			Cmd:        []string{"egress-proxy"},
			User:       "65532:65532",
			Env: []string{
				proxyKeyVar + "=" + key,
				"MANAGED_AGENT_EGRESS_PROXY_ADDR=:" + strconv.Itoa(ProxyPort),
				"MANAGED_AGENT_EGRESS_PROXY_PORTS=" + strings.Join(ports, ","),
				"MANAGED_AGENT_LOG_FORMAT=json",
			},
			Labels: map[string]string{
				LabelDeployment:  p.cfg.Deployment,
				LabelRole:        roleProxy,
				LabelProxyConfig: p.proxyConfigHash(key),
			},
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    container.NetworkMode(p.cfg.Net.Network),
			RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			// Refusals are logged: `docker logs ma-egress-<deployment>` shows them, bounded.
			LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "3"}},
			Resources: container.Resources{Memory: 256 << 20, MemorySwap: 256 << 20, NanoCPUs: 1e9, PidsLimit: &pids},
		},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("create the egress proxy: image %s not found (run make egress-image, or set MANAGED_AGENT_DOCKER_EGRESS_IMAGE): %w", p.cfg.Net.ProxyImage, err)
		}
		return "", fmt.Errorf("create the egress proxy %s: %w", name, err)
	}
	if _, err := p.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start the egress proxy %s: %w", name, err)
	}
	if err := p.awaitListening(ctx, res.ID); err != nil {
		return "", err
	}
	p.egress.key = key
	// A new proxy serves the sandboxes that exist already.
	nets, err := p.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.
		Add("label", LabelDeployment+"="+p.cfg.Deployment).Add("label", LabelRole+"="+roleSessionNetwork)})
	if err != nil {
		return "", fmt.Errorf("list session networks for the new egress proxy: %w", err)
	}
	for _, n := range nets.Items {
		// A network removed meanwhile (its sandbox destroyed) needs no proxy.
		if _, err := p.connectProxy(ctx, n.ID, res.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return "", err
		}
	}
	return res.ID, nil
}

// proxyStartTimeout bounds how long a new proxy may take to listen.
const proxyStartTimeout = 30 * time.Second

// awaitListening follows a new proxy's log until it says it listens, so the first sandbox's
// first request does not race its start; a proxy that exits instead fails with its log.
func (p *Provider) awaitListening(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, proxyStartTimeout)
	defer cancel()
	logs, err := p.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return fmt.Errorf("follow the egress proxy's log: %w", err)
	}
	defer logs.Close()
	var seen []byte
	buf := make([]byte, 4096)
	for {
		n, err := logs.Read(buf)
		seen = append(seen, buf[:n]...)
		if strings.Contains(string(seen), "egress proxy listening") {
			return nil
		}
		if err != nil {
			// The log ends when the process does; show its (multiplexed) text.
			text := strings.Map(func(r rune) rune {
				if r < ' ' && r != '\n' {
					return -1
				}
				return r
			}, string(seen[max(0, len(seen)-2048):]))
			return fmt.Errorf("the egress proxy did not start listening (%w): %s", err, strings.TrimSpace(text))
		}
	}
}

// proxyConfigHash covers every setting of the proxy container; the key enters as a hash.
func (p *Provider) proxyConfigHash(key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "v1 image=%q network=%q ports=%v port=%d\n", p.cfg.Net.ProxyImage, p.cfg.Net.Network, p.cfg.Net.ProxyPorts, ProxyPort)
	k := sha256.Sum256([]byte(key))
	h.Write(k[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// ensureSessionNetwork returns the id of the internal network name, creating it if needed.
// Engines before API 1.44 create a second network of a name that exists, so after a create
// every creator keeps the lowest id of that name and removes the others: concurrent
// creates agree on one.
func (p *Provider) ensureSessionNetwork(ctx context.Context, name string, labels map[string]string) (string, error) {
	ids, err := p.networksNamed(ctx, name)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		// inhibit_ipv4: the host takes no address on the bridge. Internal alone leaves the
		// host one (the network's gateway), through which the sandbox would reach any host
		// service listening on all addresses, past the proxy and its port list; with none,
		// the proxy is the only other address on the network.
		opts := client.NetworkCreateOptions{Driver: "bridge", Internal: true, Labels: labels,
			Options: map[string]string{optInhibitIPv4: "true"}}
		if _, err := p.cli.NetworkCreate(ctx, name, opts); err != nil && !cerrdefs.IsConflict(err) {
			return "", fmt.Errorf("create the sandbox network %s: %w", name, err)
		}
		if ids, err = p.networksNamed(ctx, name); err != nil {
			return "", err
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("create the sandbox network %s: the engine does not list it", name)
		}
	}
	for _, extra := range ids[1:] {
		_, _ = p.cli.NetworkRemove(ctx, extra, client.NetworkRemoveOptions{}) // in use: a later Destroy removes it
	}
	return ids[0], nil
}

// networksNamed returns the ids of the networks called exactly name, sorted.
func (p *Provider) networksNamed(ctx context.Context, name string) ([]string, error) {
	res, err := p.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	if err != nil {
		return nil, fmt.Errorf("list networks named %s: %w", name, err)
	}
	var ids []string
	for _, n := range res.Items {
		if n.Name == name { // the filter matches substrings
			ids = append(ids, n.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// connectProxy attaches the proxy to a session network under ProxyAlias, unless it is on it,
// and returns the network's (first IPv4) subnet, or the zero prefix if the engine shows none.
func (p *Provider) connectProxy(ctx context.Context, netID, proxyID string) (netip.Prefix, error) {
	info, err := p.cli.NetworkInspect(ctx, netID, client.NetworkInspectOptions{})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("inspect sandbox network %s: %w", netID, err)
	}
	var subnet netip.Prefix
	for _, c := range info.Network.IPAM.Config {
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			subnet = c.Subnet.Masked()
			break
		}
	}
	if _, ok := info.Network.Containers[proxyID]; ok {
		return subnet, nil
	}
	_, err = p.cli.NetworkConnect(ctx, netID, client.NetworkConnectOptions{
		Container: proxyID, EndpointConfig: &network.EndpointSettings{Aliases: []string{ProxyAlias}},
	})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return netip.Prefix{}, fmt.Errorf("connect the egress proxy to sandbox network %s: %w", netID, err)
	}
	return subnet, nil
}

// removeNetwork removes a sandbox's session network (every network of its name), taking the
// proxy off it first. None is not an error.
func (p *Provider) removeNetwork(ctx context.Context, containerName string) error {
	ids, err := p.networksNamed(ctx, sessionNetwork(containerName))
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		_, _ = p.cli.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: p.ProxyName(), Force: true})
		if _, err := p.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox network %s: %w", sessionNetwork(containerName), err))
		}
	}
	return errors.Join(errs...)
}

// orphanNetworks adds to a List the session networks whose container is gone (a create
// that failed between the two, a container removed by hand), so the orphan sweep's Destroy
// removes them too.
func (p *Provider) orphanNetworks(ctx context.Context, listed []sandbox.Resource) ([]sandbox.Resource, error) {
	res, err := p.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.
		Add("label", LabelDeployment+"="+p.cfg.Deployment).Add("label", LabelRole+"="+roleSessionNetwork)})
	if err != nil {
		return listed, fmt.Errorf("list docker sandbox networks: %w", err)
	}
	have := map[string]bool{}
	for _, r := range listed {
		have[r.Ref.ExternalID] = true
	}
	for _, n := range res.Items {
		name, ok := strings.CutSuffix(n.Name, "-net")
		if !ok || !sandbox.IsName(name) || have[name] {
			continue
		}
		have[name] = true
		created := n.Created
		if created.IsZero() {
			created = time.Now() // unknown age: the next sweeps will see it again
		}
		listed = append(listed, sandbox.Resource{
			Ref: sandbox.Ref{Provider: Name, ExternalID: name}, SessionID: n.Labels[LabelSession], Created: created,
		})
	}
	return listed, nil
}
