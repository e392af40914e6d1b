// Package archtest holds the test that encodes DESIGN.md §3's dependency rules with `go list`,
// so that a change that breaks one fails CI with the package, the forbidden import and,
// for a rule about reach, the chain of imports that leads to it.
package archtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/managed-agents/managed-agents"

// pkg is what `go list -json` says of one package (non-test files only: tests may import what
// they need to set things up).
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the dependency test runs `go list`")
	out, err := exec.Command(goBin, "list", "-e", "-json=ImportPath,Imports,Deps", module+"/...").Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Fatalf("go list: %v\n%s", err, exitErr.Stderr)
	}
	require.NoError(t, err)
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs[p.ImportPath] = p
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// internal names a package of this module by its path under the module.
func internal(rel string) string { return module + "/" + rel }

// under reports whether path is prefix or a package below it.
func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

func stdlib(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// Forbidden everywhere the rules name them: Temporal, Kubernetes, HTTP.
var (
	temporal   = []string{"go.temporal.io"}
	kubernetes = []string{"k8s.io", "sigs.k8s.io"}
	httpPkgs   = []string{"net/http"}
)

func prefixes(lists ...[]string) []string { return slices.Concat(lists...) }

type rule struct {
	name string
	// subject reports whether the rule is about package p.
	subject func(p string) bool
	// reach: the rule is about every dependency (go list -deps), not only direct imports.
	reach bool
	// forbidden are import paths (and everything below them) the subject must not use.
	forbidden []string
	// only, if set, are the direct imports allowed besides the standard library.
	only []string
	// skip names work in flight on another branch that makes the rule fail today.
	skip string
}

func rules() []rule {
	is := func(rels ...string) func(string) bool {
		return func(p string) bool {
			return slices.ContainsFunc(rels, func(rel string) bool { return p == internal(rel) })
		}
	}
	return []rule{
		{
			name:    "agent imports only model, tools, sandbox interfaces, wire and ids",
			subject: is("internal/agent"),
			only:    []string{internal("internal/model"), internal("internal/tools"), internal("internal/tools/config"), internal("internal/sandbox"), internal("internal/wire"), internal("internal/ids"), internal("internal/model/catalog")},
		},
		{
			name:    "agent never reaches store, sessions, turns, httpapi, durable, Temporal, Kubernetes or net/http",
			subject: is("internal/agent"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/httpapi"), internal("internal/durable")},
				temporal, kubernetes, httpPkgs),
		},
		{
			name:    "sessions never reaches agent, turns, sandbox, durable, Temporal or Kubernetes",
			subject: is("internal/sessions"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/agent"), internal("internal/turns"), internal("internal/sandbox"), internal("internal/durable")},
				temporal, kubernetes),
		},
		{
			name:      "httpapi calls sessions, never store directly",
			subject:   func(p string) bool { return under(p, internal("internal/httpapi")) },
			forbidden: []string{internal("internal/store")},
		},
		{
			name:      "turns never reaches httpapi, sessions or Temporal",
			subject:   is("internal/turns"),
			reach:     true,
			forbidden: prefixes([]string{internal("internal/httpapi"), internal("internal/sessions")}, temporal),
		},
		{
			name:      "durable drives the log through turns, never store directly",
			subject:   func(p string) bool { return under(p, internal("internal/durable")) },
			forbidden: []string{internal("internal/store")},
		},
		{
			name: "nothing imports durable but app",
			subject: func(p string) bool {
				return under(p, module) && !under(p, internal("internal/durable")) && p != internal("internal/app")
			},
			forbidden: []string{internal("internal/durable")},
		},
		{
			name:      "store reaches no HTTP, Temporal or Kubernetes package",
			subject:   func(p string) bool { return under(p, internal("internal/store")) },
			reach:     true,
			forbidden: prefixes(httpPkgs, temporal, kubernetes),
		},
		{
			name:      "sandbox providers never reach agent",
			subject:   func(p string) bool { return strings.HasPrefix(p, internal("internal/sandbox")+"/") },
			reach:     true,
			forbidden: []string{internal("internal/agent")},
		},
		{
			name:      "api/v1alpha1 imports nothing of this module",
			subject:   func(p string) bool { return under(p, module+"/api") },
			forbidden: []string{module},
		},
		{
			name:    "controllers reach sessions, store and wire, never turns, agent, durable, httpapi or Temporal",
			subject: func(p string) bool { return under(p, module+"/controllers") },
			reach:   true,
			forbidden: prefixes([]string{internal("internal/turns"), internal("internal/agent"), internal("internal/durable"), internal("internal/httpapi")},
				temporal),
		},
		{
			name:      "hostpattern is pure: the standard library only, no network",
			subject:   is("internal/hostpattern"),
			only:      []string{},
			forbidden: prefixes([]string{"net/http", "os"}),
		},
		{
			name:    "egress imports only hostpattern besides the standard library",
			subject: is("internal/egress"),
			only:    []string{internal("internal/hostpattern")},
		},
		{
			name:      "egress never reaches sandbox, store, Temporal or Kubernetes: it runs alone, keyed only",
			subject:   is("internal/egress"),
			reach:     true,
			forbidden: prefixes([]string{internal("internal/sandbox"), internal("internal/store")}, temporal, kubernetes),
		},
		{
			name:    "sandbox/workspace imports only sandbox and doublestar besides the standard library",
			subject: is("internal/sandbox/workspace"),
			only:    []string{internal("internal/sandbox"), "github.com/bmatcuk/doublestar/v4"},
		},
		{
			name:    "sandboxd imports only sandbox and sandbox/workspace besides the standard library",
			subject: func(p string) bool { return under(p, internal("internal/sandboxd")) },
			only:    []string{internal("internal/sandbox"), internal("internal/sandbox/workspace")},
		},
		{
			name:    "sandboxd never reaches store, sessions, turns, agent, durable, Temporal or Kubernetes: it runs alone in the pod",
			subject: func(p string) bool { return under(p, internal("internal/sandboxd")) },
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"), internal("internal/durable")},
				temporal, kubernetes),
		},
		{
			name:    "the kubernetes provider never reaches store, sessions, turns, agent, durable, httpapi, controllers or Temporal: it talks to the cluster and to sandboxd only",
			subject: is("internal/sandbox/kubernetes"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/durable"), internal("internal/httpapi"), module + "/controllers"}, temporal),
		},
		{
			name:    "sandbox/remote imports only sandbox, go-retryablehttp and doublestar besides the standard library: it is what the remote providers share, not one of them",
			subject: is("internal/sandbox/remote"),
			only:    []string{internal("internal/sandbox"), "github.com/hashicorp/go-retryablehttp", "github.com/bmatcuk/doublestar/v4"},
		},
		{
			name:    "the e2b provider imports only sandbox, sandbox/remote, connect and doublestar besides the standard library",
			subject: is("internal/sandbox/e2b"),
			only: []string{internal("internal/sandbox"), internal("internal/sandbox/remote"), "connectrpc.com/connect",
				"github.com/bmatcuk/doublestar/v4"},
		},
		{
			name:    "the e2b fake imports only connect and sandbox/workspace besides the standard library: it speaks the wire, not the client's types",
			subject: is("internal/sandbox/e2b/e2bfake"),
			only:    []string{"connectrpc.com/connect", internal("internal/sandbox/workspace")},
		},
		{
			name:    "the e2b provider never reaches store, sessions, turns, agent, durable, httpapi, controllers, Temporal or Kubernetes",
			subject: func(p string) bool { return under(p, internal("internal/sandbox/e2b")) },
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/durable"), internal("internal/httpapi"), module + "/controllers"}, temporal, kubernetes),
		},
		{
			name:    "the opensandbox provider imports only sandbox, sandbox/remote and doublestar besides the standard library",
			subject: is("internal/sandbox/opensandbox"),
			only:    []string{internal("internal/sandbox"), internal("internal/sandbox/remote"), "github.com/bmatcuk/doublestar/v4"},
		},
		{
			name:    "the opensandbox provider never reaches store, turns, agent, durable, httpapi, controllers, Temporal or Kubernetes",
			subject: is("internal/sandbox/opensandbox"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/durable"), internal("internal/httpapi"), module + "/controllers"}, temporal, kubernetes),
		},
		{
			name:    "the opensandbox fake imports only sandbox/workspace besides the standard library",
			subject: is("internal/sandbox/opensandbox/opensandboxfake"),
			only:    []string{internal("internal/sandbox/workspace")},
		},
		{
			name:    "netguard imports only the standard library: every outbound client can use it",
			subject: is("internal/netguard"),
			only:    []string{},
		},
		{
			name:    "netguard never reaches store, agent, sessions, turns, durable, Temporal or Kubernetes",
			subject: is("internal/netguard"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/durable")}, temporal, kubernetes),
		},
		{
			name:    "tools/web imports only wire, netguard, html-to-markdown, golang.org/x/net/html and idna besides the standard library",
			subject: is("internal/tools/web"),
			only: []string{internal("internal/wire"), internal("internal/netguard"),
				"github.com/JohannesKaufmann/html-to-markdown/v2/converter", "github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base",
				"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark", "github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table",
				"golang.org/x/net/html", "golang.org/x/net/html/atom", "golang.org/x/net/html/charset", "golang.org/x/net/idna"},
		},
		{
			name:    "tools/web never reaches store, sessions, turns, agent, sandbox, durable, Temporal or Kubernetes: the worker hands it to the agent loop",
			subject: is("internal/tools/web"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/sandbox"), internal("internal/durable")}, temporal, kubernetes),
		},
		{
			name:    "mcp imports only wire and the MCP Go SDK besides the standard library",
			subject: is("internal/mcp"),
			only:    []string{internal("internal/wire"), "github.com/modelcontextprotocol/go-sdk/mcp", "github.com/modelcontextprotocol/go-sdk/jsonrpc"},
		},
		{
			name:    "mcp never reaches store, sessions, turns, agent, sandbox, durable, httpapi, Temporal or Kubernetes: the agent's toolset drives it",
			subject: func(p string) bool { return under(p, internal("internal/mcp")) },
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/sandbox"), internal("internal/durable"), internal("internal/httpapi")}, temporal, kubernetes),
		},
		{
			name:    "mcptest imports only the MCP Go SDK besides the standard library: it speaks the protocol, not the client's types",
			subject: is("internal/mcp/mcptest"),
			only:    []string{"github.com/modelcontextprotocol/go-sdk/mcp"},
		},
		{
			name:    "mcpsession imports only agent, mcp, mcpurl and wire: credentials and call claims come through its own interfaces",
			subject: is("internal/mcpsession"),
			only:    []string{internal("internal/agent"), internal("internal/mcp"), internal("internal/mcpurl"), internal("internal/wire")},
		},
		{
			name:      "mcpsession never reaches store, sessions, turns, durable, httpapi or Temporal",
			subject:   is("internal/mcpsession"),
			reach:     true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/durable"), internal("internal/httpapi")}, temporal, kubernetes),
		},
		{
			name:      "secretbox and mcpurl are pure: the standard library only, no network or files",
			subject:   is("internal/secretbox", "internal/mcpurl"),
			only:      []string{},
			forbidden: prefixes([]string{"net/http", "os"}),
		},
		{
			name:    "workqueue imports only store, sessions, wire and ids besides the standard library: a sibling of sessions",
			subject: is("internal/workqueue"),
			only:    []string{internal("internal/store"), internal("internal/sessions"), internal("internal/wire"), internal("internal/ids")},
		},
		{
			name:    "workqueue never reaches agent, turns, durable, sandbox, httpapi, Temporal or Kubernetes",
			subject: is("internal/workqueue"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/agent"), internal("internal/turns"), internal("internal/durable"), internal("internal/sandbox"),
				internal("internal/httpapi")}, temporal, kubernetes),
		},
		{
			name:    "credentials imports only store, secretbox, mcpurl, wire and singleflight besides the standard library",
			subject: is("internal/credentials"),
			only: []string{internal("internal/store"), internal("internal/secretbox"), internal("internal/mcpurl"), internal("internal/wire"),
				"golang.org/x/sync/singleflight"},
		},
		{
			name:    "credentials never reaches agent, turns, durable, sessions, httpapi, sandbox, Temporal or Kubernetes: the worker resolves tokens through it",
			subject: is("internal/credentials"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/agent"), internal("internal/turns"), internal("internal/durable"), internal("internal/sessions"),
				internal("internal/httpapi"), internal("internal/sandbox")}, temporal, kubernetes),
		},
		{
			name:    "tracing imports only model and the OpenTelemetry API besides the standard library: app builds the SDK and its exporter",
			subject: is("internal/tracing"),
			only: []string{internal("internal/model"), "go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes",
				"go.opentelemetry.io/otel/propagation", "go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/trace/noop"},
		},
		{
			name:    "tracing never reaches store, sessions, turns, agent, durable, httpapi, Temporal, Kubernetes or the OTel SDK",
			subject: is("internal/tracing"),
			reach:   true,
			forbidden: prefixes([]string{internal("internal/store"), internal("internal/sessions"), internal("internal/turns"), internal("internal/agent"),
				internal("internal/durable"), internal("internal/httpapi"), "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"}, temporal, kubernetes),
		},
		{
			name:      "only app builds the OTel SDK and exporters: every other part gets a TracerProvider",
			subject:   func(p string) bool { return under(p, module) && p != internal("internal/app") },
			forbidden: []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"},
		},
		{
			name:    "metrics imports only the Prometheus client besides the standard library: the recording packages declare what they record",
			subject: is("internal/metrics"),
			only: []string{"github.com/prometheus/client_golang/prometheus", "github.com/prometheus/client_golang/prometheus/collectors",
				"github.com/prometheus/client_golang/prometheus/promhttp"},
		},
		{
			name: "nothing imports metrics but app: the recording packages declare the interfaces it implements",
			subject: func(p string) bool {
				return under(p, module) && p != internal("internal/app") && p != internal("internal/metrics")
			},
			forbidden: []string{internal("internal/metrics")},
		},
		{
			name:    "loadtest imports only the official Go SDK besides the standard library: it measures a server as a client does",
			subject: is("internal/loadtest"),
			only: []string{"github.com/anthropics/anthropic-sdk-go/v2", "github.com/anthropics/anthropic-sdk-go/v2/option",
				"github.com/anthropics/anthropic-sdk-go/v2/packages/param", "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"},
		},
		{
			name:      "loadtest never reaches any package of this module, Temporal or Kubernetes",
			subject:   is("internal/loadtest"),
			reach:     true,
			forbidden: prefixes([]string{module}, temporal, kubernetes),
		},
		{
			name:      "wire imports nothing internal",
			subject:   is("internal/wire"),
			forbidden: []string{module},
		},
	}
}

// violations lists what p uses against r, each with the chain of imports that leads to it.
func (r rule) violations(p pkg, pkgs map[string]pkg) []string {
	used := p.Imports
	if r.reach {
		used = p.Deps
	}
	var out []string
	for _, imp := range used {
		bad := slices.ContainsFunc(r.forbidden, func(f string) bool { return under(imp, f) })
		if r.only != nil && !stdlib(imp) && !slices.Contains(r.only, imp) {
			bad = true
		}
		if !bad {
			continue
		}
		msg := fmt.Sprintf("%s imports %s", short(p.ImportPath), short(imp))
		if chain := importChain(pkgs, p.ImportPath, imp); len(chain) > 2 {
			msg = fmt.Sprintf("%s reaches %s through %s", short(p.ImportPath), short(imp), strings.Join(mapShort(chain), " → "))
		}
		out = append(out, msg)
	}
	return out
}

// importChain is a shortest chain of direct imports from `from` to `to`.
func importChain(pkgs map[string]pkg, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var chain []string
			for at := to; at != ""; at = prev[at] {
				chain = append([]string{at}, chain...)
			}
			return chain
		}
		for _, next := range pkgs[cur].Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return nil
}

func short(path string) string { return strings.TrimPrefix(path, module+"/") }

func mapShort(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = short(p)
	}
	return out
}

func TestDependencyRules(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	for _, r := range rules() {
		t.Run(r.name, func(t *testing.T) {
			if r.skip != "" {
				t.Skip(r.skip)
			}
			var subjects int
			var broken []string
			for path, p := range pkgs {
				if !r.subject(path) {
					continue
				}
				subjects++
				broken = append(broken, r.violations(p, pkgs)...)
			}
			require.NotZero(t, subjects, "the rule is about no package: was one renamed?")
			slices.Sort(broken)
			require.Empty(t, broken, "DESIGN.md §3: %s", r.name)
		})
	}
}

// The rules must catch what they are about: fed a forged graph, each reports the break.
func TestDependencyRulesCatchBreaks(t *testing.T) {
	t.Parallel()
	forged := map[string]pkg{
		internal("internal/agent"): {ImportPath: internal("internal/agent"),
			Imports: []string{"fmt", internal("internal/tools")}, Deps: []string{"fmt", internal("internal/tools"), "net/http"}},
		internal("internal/tools"):        {ImportPath: internal("internal/tools"), Imports: []string{"net/http"}},
		internal("internal/httpapi"):      {ImportPath: internal("internal/httpapi"), Imports: []string{internal("internal/store")}},
		internal("internal/wire"):         {ImportPath: internal("internal/wire"), Imports: []string{internal("internal/ids")}},
		internal("internal/sandbox/kube"): {ImportPath: internal("internal/sandbox/kube"), Deps: []string{internal("internal/agent")}},
		internal("internal/stream"):       {ImportPath: internal("internal/stream"), Imports: []string{internal("internal/durable")}},
		internal("internal/turns"):        {ImportPath: internal("internal/turns"), Imports: []string{internal("internal/store")}, Deps: []string{internal("internal/store")}},
		internal("internal/sandboxd"): {ImportPath: internal("internal/sandboxd"), Imports: []string{internal("internal/sandbox"), internal("internal/turns")},
			Deps: []string{internal("internal/sandbox"), internal("internal/turns"), internal("internal/store")}},
		module + "/api/v1alpha1": {ImportPath: module + "/api/v1alpha1", Imports: []string{internal("internal/wire")}},
		module + "/controllers": {ImportPath: module + "/controllers", Imports: []string{internal("internal/sessions")},
			Deps: []string{internal("internal/sessions"), internal("internal/durable")}},
	}
	want := map[string][]string{
		"agent never reaches store, sessions, turns, httpapi, durable, Temporal, Kubernetes or net/http": {
			"internal/agent reaches net/http through internal/agent → internal/tools → net/http"},
		"httpapi calls sessions, never store directly": {"internal/httpapi imports internal/store"},
		"wire imports nothing internal":                {"internal/wire imports internal/ids"},
		"sandbox providers never reach agent":          {"internal/sandbox/kube imports internal/agent"},
		"nothing imports durable but app":              {"internal/stream imports internal/durable"},
		"api/v1alpha1 imports nothing of this module":  {"api/v1alpha1 imports internal/wire"},
		"controllers reach sessions, store and wire, never turns, agent, durable, httpapi or Temporal": {
			"controllers imports internal/durable"},
		"sandboxd imports only sandbox and sandbox/workspace besides the standard library": {"internal/sandboxd imports internal/turns"},
		"sandboxd never reaches store, sessions, turns, agent, durable, Temporal or Kubernetes: it runs alone in the pod": {
			"internal/sandboxd imports internal/turns",
			"internal/sandboxd reaches internal/store through internal/sandboxd → internal/turns → internal/store"},
	}
	for _, r := range rules() {
		var got []string
		for path, p := range forged {
			if r.subject(path) {
				got = append(got, r.violations(p, forged)...)
			}
		}
		slices.Sort(got)
		require.Equal(t, want[r.name], got, r.name)
	}
	agentOnly := rules()[0]
	require.Equal(t, []string{"internal/agent imports github.com/x/y"},
		agentOnly.violations(pkg{ImportPath: internal("internal/agent"), Imports: []string{"strings", "github.com/x/y", internal("internal/wire")}}, forged),
		"agent may import only its list and the standard library")
}
