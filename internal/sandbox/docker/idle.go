package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

var (
	_ sandbox.Stopper = (*Provider)(nil)
	_ sandbox.Lister  = (*Provider)(nil)
)

// stopGrace is how long a stopping container's processes get after SIGTERM before SIGKILL:
// an idle sandbox runs nothing worth waiting for.
const stopGrace = 5

// Stop implements sandbox.Stopper: the container stops with its workspace volume kept;
// Attach starts it again. One already stopped is left as is; one removed is ErrGone.
func (p *Provider) Stop(ctx context.Context, ref sandbox.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	grace := stopGrace
	if _, err := p.engine.ContainerStop(ctx, ref.ExternalID, client.ContainerStopOptions{Timeout: &grace}); err != nil {
		return p.engineError("stop", ref.ExternalID, err)
	}
	return nil
}

// List implements sandbox.Lister: every container of this deployment (its LabelDeployment),
// running or not, with the session its label names.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	res, err := p.engine.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", LabelDeployment+"="+p.cfg.Deployment),
	})
	if err != nil {
		return nil, fmt.Errorf("list docker sandboxes: %w", err)
	}
	var claims map[string]string // container → session, of those claimed from a warm pool
	out := make([]sandbox.Resource, 0, len(res.Items))
	for _, c := range res.Items {
		name := ""
		for _, n := range c.Names {
			if n = strings.TrimPrefix(n, "/"); sandbox.IsName(n) {
				name = n
			}
		}
		if name == "" {
			continue // not a container this provider named
		}
		session := c.Labels[LabelSession]
		if session == "" && c.Labels[LabelPool] != "" {
			if claims == nil {
				if claims, err = p.claimedSessions(ctx); err != nil {
					return nil, fmt.Errorf("list docker sandboxes: %w", err)
				}
			}
			session = claims[name]
		}
		out = append(out, sandbox.Resource{
			Ref:       sandbox.Ref{Provider: Name, ExternalID: name},
			SessionID: session,
			Created:   time.Unix(c.Created, 0),
		})
	}
	return p.orphanNetworks(ctx, p.orphanDisks(ctx, out))
}
