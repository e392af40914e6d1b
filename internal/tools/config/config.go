// Package config owns an agent's tool configuration: parsing, validating and resolving the
// "tools" and "mcp_servers" fields into the form the API echoes and stores, and the effective
// per-tool settings the agent loop reads. The built-in tools themselves live in the parent
// package tools.
//
// Both the client-facing service (sessions) and the agent loop import it, so it is pure: it
// imports only wire and the standard library, never sandbox, store, Temporal or Kubernetes.
package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits from the SDK (API.md §3.1, §15 row 12 picks the SDK numbers over older notes).
const (
	maxTools             = 256
	maxMCPServers        = 20
	maxMCPServerNameLen  = 255
	maxMCPServerURLLen   = 2048
	maxMCPToolNameLen    = 128
	maxCustomToolNameLen = 128
	maxDomains           = 64
	maxURLSourceTools    = 128
	// An input_schema goes to the model with every call and back in every agent and session
	// response: 64 KiB (some 16k tokens) holds any real schema several times over, and with at
	// most 256 KiB of schemas per agent the default agents page (20) stays near 5 MB.
	maxInputSchemaBytes = 64 << 10
	maxSchemaBytesTotal = 256 << 10
)

// builtInNames lists the tools of agent_toolset_20260401 in the order the API documents them.
var builtInNames = []string{
	wire.ToolNameBash, wire.ToolNameRead, wire.ToolNameWrite, wire.ToolNameEdit,
	wire.ToolNameGlob, wire.ToolNameGrep, wire.ToolNameWebFetch, wire.ToolNameWebSearch,
}

// BuiltInNames returns the names of the built-in tools in documentation order.
func BuiltInNames() []string { return slices.Clone(builtInNames) }

// IsBuiltIn reports whether name is one of the built-in tools.
func IsBuiltIn(name string) bool { return slices.Contains(builtInNames, name) }

// Defaults per toolset kind (API.md §3.2, §15 row 9): built-ins run unasked, MCP tools ask,
// because an MCP server is third-party code the agent's author may not control.
var (
	agentToolsetDefault = wire.ToolDefaultConfig{Enabled: true, PermissionPolicy: wire.PermissionAlwaysAllow}
	mcpToolsetDefault   = wire.ToolDefaultConfig{Enabled: true, PermissionPolicy: wire.PermissionAlwaysAsk}
)

var customToolName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ParseAndResolve decodes the raw "tools" and "mcp_servers" values of a request body (either
// may be nil or null, meaning none) and resolves them. Both results are non-nil so they
// marshal as [] when empty. Errors are *wire.ToolConfigError, meant for a 400.
func ParseAndResolve(rawTools, rawServers json.RawMessage) ([]wire.Tool, []wire.MCPServer, error) {
	params, err := wire.DecodeToolParams(rawTools)
	if err != nil {
		return nil, nil, err
	}
	servers, err := wire.DecodeMCPServers(rawServers)
	if err != nil {
		return nil, nil, err
	}
	resolved, err := Resolve(params, servers)
	if err != nil {
		return nil, nil, err
	}
	if servers == nil {
		servers = []wire.MCPServer{}
	}
	return resolved, servers, nil
}

// Resolve validates the agent's tools and MCP servers together and returns the resolved form
// that the API echoes and stores: defaults filled in, every supplied config entry echoed with
// its effective values, and custom input schemas compacted. The result is never nil.
// Errors are *wire.ToolConfigError whose message names the field path.
func Resolve(params []wire.ToolParam, servers []wire.MCPServer) ([]wire.Tool, error) {
	r := resolver{
		servers:   map[string]int{},
		serverUse: map[string]int{},
		customAt:  map[string]int{},
		toolsetAt: -1,
	}
	if err := r.checkServers(servers); err != nil {
		return nil, err
	}
	out := make([]wire.Tool, 0, len(params))
	for i, p := range params {
		t, err := r.resolveTool(fmt.Sprintf("tools[%d]", i), i, p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := r.crossCheck(servers, out); err != nil {
		return nil, err
	}
	return out, nil
}

// resolver carries what one tool needs to know about the others while the array is walked.
type resolver struct {
	servers    map[string]int // declared MCP server name → index in mcp_servers
	serverUse  map[string]int // MCP server name → index of the toolset that references it
	customAt   map[string]int // custom tool name → index in tools
	customs    []customRef
	toolsetAt  int // index of the agent toolset, -1 if none
	clientRefs []customRef
	mcpConfigs int
	// schemaBytes sums the compacted input_schema sizes of the custom tools seen so far.
	schemaBytes int
}

// customRef is a custom tool name and where it was written, for errors found after the walk.
type customRef struct {
	path string
	name string
}

func toolErr(path, format string, args ...any) error {
	return &wire.ToolConfigError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

func (r *resolver) checkServers(servers []wire.MCPServer) error {
	if len(servers) > maxMCPServers {
		return toolErr("mcp_servers", "at most %d MCP servers are allowed (got %d)", maxMCPServers, len(servers))
	}
	for i, s := range servers {
		path := fmt.Sprintf("mcp_servers[%d]", i)
		if s.Type != wire.MCPServerTypeURL {
			return toolErr(path+".type", "must be %q (got %q)", wire.MCPServerTypeURL, s.Type)
		}
		if err := checkLength(path+".name", s.Name, maxMCPServerNameLen); err != nil {
			return err
		}
		if first, dup := r.servers[s.Name]; dup {
			return toolErr(path+".name", "duplicate MCP server name %q (first at mcp_servers[%d])", s.Name, first)
		}
		r.servers[s.Name] = i
		if err := checkServerURL(path+".url", s.URL); err != nil {
			return err
		}
	}
	return nil
}

func checkServerURL(path, raw string) error {
	if raw == "" {
		return toolErr(path, "is required")
	}
	if len(raw) > maxMCPServerURLLen {
		return toolErr(path, "must be at most %d characters (got %d)", maxMCPServerURLLen, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return toolErr(path, "must be an absolute http or https URL (got %q)", wire.Excerpt(raw, 128))
	}
	return nil
}

// checkLength requires 1..max characters (not bytes: limits are documented in characters).
func checkLength(path, s string, max int) error {
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		return toolErr(path, "is required")
	case n > max:
		return toolErr(path, "must be at most %d characters (got %d)", max, n)
	}
	return nil
}

func (r *resolver) resolveTool(path string, i int, p wire.ToolParam) (wire.Tool, error) {
	switch {
	case p.Toolset != nil:
		t, err := r.resolveToolset(path, i, p.Toolset)
		return wire.Tool{Toolset: t}, err
	case p.MCPToolset != nil:
		t, err := r.resolveMCPToolset(path, i, p.MCPToolset)
		return wire.Tool{MCPToolset: t}, err
	case p.Custom != nil:
		t, err := r.resolveCustom(path, i, p.Custom)
		return wire.Tool{Custom: t}, err
	}
	return wire.Tool{}, toolErr(path+".type", "is required")
}

func (r *resolver) resolveToolset(path string, i int, p *wire.ToolsetParam) (*wire.Toolset, error) {
	if r.toolsetAt >= 0 {
		return nil, toolErr(path+".type", "only one %s is allowed (first at tools[%d])", wire.ToolTypeAgentToolset, r.toolsetAt)
	}
	r.toolsetAt = i
	def, err := resolveDefault(path+".default_config", p.DefaultConfig, agentToolsetDefault)
	if err != nil {
		return nil, err
	}
	configs := make([]wire.ToolConfig, 0, len(p.Configs))
	seen := map[string]int{}
	for j, c := range p.Configs {
		cpath := fmt.Sprintf("%s.configs[%d]", path, j)
		rc, err := r.resolveBuiltInConfig(cpath, c, def)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[rc.Name]; dup {
			return nil, toolErr(cpath+".name", "duplicate config for built-in tool %q (first at configs[%d])", rc.Name, first)
		}
		seen[rc.Name] = j
		configs = append(configs, rc)
	}
	return &wire.Toolset{DefaultConfig: def, Configs: configs}, nil
}

// resolveDefault fills a toolset's default_config from the kind's defaults.
func resolveDefault(path string, p *wire.ToolDefaultConfigParam, def wire.ToolDefaultConfig) (wire.ToolDefaultConfig, error) {
	if p == nil {
		return def, nil
	}
	enabled, policy, err := override(path, p.Enabled, p.PermissionPolicy, def)
	return wire.ToolDefaultConfig{Enabled: enabled, PermissionPolicy: policy}, err
}

// override applies a config entry's optional enabled and permission_policy over inherited values.
func override(path string, enabled *bool, policy *wire.PermissionPolicy, inherit wire.ToolDefaultConfig) (bool, wire.PermissionPolicy, error) {
	outEnabled, outPolicy := inherit.Enabled, inherit.PermissionPolicy
	if enabled != nil {
		outEnabled = *enabled
	}
	if policy != nil {
		if !policy.Known() {
			return false, "", toolErr(path+".permission_policy.type", "unknown permission policy %q (expected %s, %s or %s)",
				string(*policy), wire.PermissionAlwaysAllow, wire.PermissionAlwaysAsk, wire.PermissionAuto)
		}
		outPolicy = *policy
	}
	return outEnabled, outPolicy, nil
}

func (r *resolver) resolveBuiltInConfig(path string, c wire.ToolConfigParam, def wire.ToolDefaultConfig) (wire.ToolConfig, error) {
	if c.Name == "" {
		return wire.ToolConfig{}, toolErr(path+".name", "is required")
	}
	if !IsBuiltIn(c.Name) {
		return wire.ToolConfig{}, toolErr(path+".name", "unknown built-in tool %q (expected one of %s)", c.Name, strings.Join(builtInNames, ", "))
	}
	if c.Type != "" && c.Type != c.Name {
		return wire.ToolConfig{}, toolErr(path+".type", "must equal name %q when set (got %q)", c.Name, c.Type)
	}
	enabled, policy, err := override(path, c.Enabled, c.PermissionPolicy, def)
	if err != nil {
		return wire.ToolConfig{}, err
	}
	if err := r.checkWebExtras(path, c); err != nil {
		return wire.ToolConfig{}, err
	}
	return wire.ToolConfig{
		Name:             c.Name,
		Enabled:          enabled,
		PermissionPolicy: policy,
		AllowedDomains:   slices.Clone(c.AllowedDomains),
		BlockedDomains:   slices.Clone(c.BlockedDomains),
		MaxContentTokens: clonePtr(c.MaxContentTokens),
		UserLocation:     cloneUserLocation(c.UserLocation),
		URLSources:       cloneURLSources(c.URLSources),
	}, nil
}

// webExtra is one field that only some built-in tools accept.
type webExtra struct {
	field string
	set   bool
	tools []string
}

func (r *resolver) checkWebExtras(path string, c wire.ToolConfigParam) error {
	both := []string{wire.ToolNameWebFetch, wire.ToolNameWebSearch}
	fetch := []string{wire.ToolNameWebFetch}
	extras := []webExtra{
		{"allowed_domains", c.AllowedDomains != nil, both},
		{"blocked_domains", c.BlockedDomains != nil, both},
		{"max_content_tokens", c.MaxContentTokens != nil, fetch},
		{"user_location", c.UserLocation != nil, []string{wire.ToolNameWebSearch}},
		{"url_sources", c.URLSources != nil, fetch},
	}
	for _, e := range extras {
		if e.set && !slices.Contains(e.tools, c.Name) {
			return toolErr(path+"."+e.field, "is only supported by %s, not %q", strings.Join(e.tools, " and "), c.Name)
		}
	}
	if c.AllowedDomains != nil && c.BlockedDomains != nil {
		return toolErr(path, "Only one of allowed_domains or blocked_domains may be set.")
	}
	pathsAllowed := c.Name == wire.ToolNameWebSearch
	if err := checkDomains(path+".allowed_domains", c.AllowedDomains, pathsAllowed); err != nil {
		return err
	}
	if err := checkDomains(path+".blocked_domains", c.BlockedDomains, pathsAllowed); err != nil {
		return err
	}
	if c.MaxContentTokens != nil && *c.MaxContentTokens <= 0 {
		return toolErr(path+".max_content_tokens", "must be a positive integer (got %d)", *c.MaxContentTokens)
	}
	if err := checkUserLocation(path+".user_location", c.UserLocation); err != nil {
		return err
	}
	return r.checkURLSources(path+".url_sources", c.URLSources)
}

// checkDomains validates a domain list; nil means unset and is fine.
func checkDomains(path string, domains []string, pathsAllowed bool) error {
	if domains == nil {
		return nil
	}
	if len(domains) == 0 {
		return toolErr(path, "must not be empty; omit it or send null instead")
	}
	if len(domains) > maxDomains {
		return toolErr(path, "must have at most %d entries (got %d)", maxDomains, len(domains))
	}
	for k, d := range domains {
		if !validDomain(d, pathsAllowed) {
			rule := "a plain hostname like \"docs.example.com\" (no scheme, port or path)"
			if pathsAllowed {
				rule = "a plain hostname like \"docs.example.com\", optionally followed by a path (no scheme or port)"
			}
			return toolErr(fmt.Sprintf("%s[%d]", path, k), "%q is not %s", d, rule)
		}
	}
	return nil
}

func validDomain(d string, pathsAllowed bool) bool {
	host, rest, hasPath := strings.Cut(d, "/")
	if hasPath && (!pathsAllowed || strings.ContainsAny(rest, " \t\r\n?#")) {
		return false
	}
	return validHostname(host)
}

// validHostname accepts LDH labels; a colon (port), scheme or wildcard fails the label rule.
func validHostname(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, ch := range label {
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

func checkUserLocation(path string, l *wire.ToolUserLocation) error {
	if l == nil {
		return nil
	}
	if l.Type != wire.ToolUserLocationApproximate {
		return toolErr(path+".type", "must be %q (got %q)", wire.ToolUserLocationApproximate, l.Type)
	}
	if l.Country != nil && !isAlpha2(*l.Country) {
		return toolErr(path+".country", "must be a two-letter ISO 3166-1 country code like \"US\" (got %q)", *l.Country)
	}
	return nil
}

func isAlpha2(s string) bool {
	if len(s) != 2 {
		return false
	}
	for _, ch := range s {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
			return false
		}
	}
	return true
}

func (r *resolver) checkURLSources(path string, s *wire.ToolURLSources) error {
	if s == nil {
		return nil
	}
	if err := checkURLSourceFilter(path+".user_input", s.UserInput, false, nil); err != nil {
		return err
	}
	recordClient := func(refPath, name string) error {
		// Custom tools may come later in the array, so the names are checked after the walk.
		r.clientRefs = append(r.clientRefs, customRef{refPath, name})
		return nil
	}
	if err := checkURLSourceFilter(path+".client_tool_results", s.ClientToolResults, true, recordClient); err != nil {
		return err
	}
	serverTool := func(refPath, name string) error {
		if name != wire.ToolNameWebSearch && name != wire.ToolNameWebFetch {
			return toolErr(refPath, "must be %q or %q (got %q)", wire.ToolNameWebSearch, wire.ToolNameWebFetch, name)
		}
		return nil
	}
	if err := checkURLSourceFilter(path+".server_tool_results", s.ServerToolResults, true, serverTool); err != nil {
		return err
	}
	if isNone(s.UserInput) && isNone(s.ClientToolResults) && isNone(s.ServerToolResults) {
		return toolErr(path, "user_input, client_tool_results and server_tool_results cannot all be %q: web_fetch could fetch nothing (disable the tool instead)", wire.ToolURLSourceNone)
	}
	return nil
}

func isNone(f *wire.ToolURLSourceFilter) bool {
	return f != nil && f.Type == wire.ToolURLSourceNone
}

// checkURLSourceFilter validates one url_sources member; lists says whether only/except are
// allowed, and checkName vets each listed tool name.
func checkURLSourceFilter(path string, f *wire.ToolURLSourceFilter, lists bool, checkName func(path, name string) error) error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case wire.ToolURLSourceAll, wire.ToolURLSourceNone:
		if f.Tools != nil {
			return toolErr(path+".tools", "is only allowed with type %q or %q", wire.ToolURLSourceOnly, wire.ToolURLSourceExcept)
		}
		return nil
	case wire.ToolURLSourceOnly, wire.ToolURLSourceExcept:
		if lists {
			return checkToolReferences(path+".tools", f.Tools, checkName)
		}
	case "":
		return toolErr(path+".type", "is required")
	}
	if !lists {
		return toolErr(path+".type", "must be %q or %q (got %q)", wire.ToolURLSourceAll, wire.ToolURLSourceNone, f.Type)
	}
	return toolErr(path+".type", "must be %q, %q, %q or %q (got %q)",
		wire.ToolURLSourceAll, wire.ToolURLSourceNone, wire.ToolURLSourceOnly, wire.ToolURLSourceExcept, f.Type)
}

func checkToolReferences(path string, refs []wire.ToolReference, checkName func(path, name string) error) error {
	if len(refs) == 0 {
		return toolErr(path, "must list at least one tool")
	}
	if len(refs) > maxURLSourceTools {
		return toolErr(path, "must have at most %d entries (got %d)", maxURLSourceTools, len(refs))
	}
	seen := map[string]int{}
	for k, ref := range refs {
		refPath := fmt.Sprintf("%s[%d]", path, k)
		if ref.Type != wire.ToolReferenceType {
			return toolErr(refPath+".type", "must be %q (got %q)", wire.ToolReferenceType, ref.Type)
		}
		if ref.Name == "" {
			return toolErr(refPath+".name", "is required")
		}
		if first, dup := seen[ref.Name]; dup {
			return toolErr(refPath+".name", "duplicate tool %q (first at tools[%d])", ref.Name, first)
		}
		seen[ref.Name] = k
		if err := checkName(refPath+".name", ref.Name); err != nil {
			return err
		}
	}
	return nil
}

func (r *resolver) resolveMCPToolset(path string, i int, p *wire.MCPToolsetParam) (*wire.MCPToolset, error) {
	name := p.MCPServerName
	if err := checkLength(path+".mcp_server_name", name, maxMCPServerNameLen); err != nil {
		return nil, err
	}
	if _, declared := r.servers[name]; !declared {
		return nil, toolErr(path+".mcp_server_name", "MCP server %q is not declared in mcp_servers", name)
	}
	if first, dup := r.serverUse[name]; dup {
		return nil, toolErr(path+".mcp_server_name", "MCP server %q already has a toolset at tools[%d]; use one mcp_toolset per server", name, first)
	}
	r.serverUse[name] = i
	def, err := resolveDefault(path+".default_config", p.DefaultConfig, mcpToolsetDefault)
	if err != nil {
		return nil, err
	}
	configs := make([]wire.MCPToolConfig, 0, len(p.Configs))
	seen := map[string]int{}
	for j, c := range p.Configs {
		cpath := fmt.Sprintf("%s.configs[%d]", path, j)
		if err := checkLength(cpath+".name", c.Name, maxMCPToolNameLen); err != nil {
			return nil, err
		}
		if first, dup := seen[c.Name]; dup {
			return nil, toolErr(cpath+".name", "duplicate config for MCP tool %q of server %q (first at configs[%d])", c.Name, name, first)
		}
		seen[c.Name] = j
		enabled, policy, err := override(cpath, c.Enabled, c.PermissionPolicy, def)
		if err != nil {
			return nil, err
		}
		configs = append(configs, wire.MCPToolConfig{Name: c.Name, Enabled: enabled, PermissionPolicy: policy})
	}
	r.mcpConfigs += len(configs)
	return &wire.MCPToolset{MCPServerName: name, DefaultConfig: def, Configs: configs}, nil
}

func (r *resolver) resolveCustom(path string, i int, p *wire.CustomToolParam) (*wire.CustomTool, error) {
	if p.Name == "" {
		return nil, toolErr(path+".name", "is required")
	}
	if len(p.Name) > maxCustomToolNameLen || !customToolName.MatchString(p.Name) {
		return nil, toolErr(path+".name", "must be 1-%d characters of letters, digits, underscores and hyphens (got %q)", maxCustomToolNameLen, wire.Excerpt(p.Name, maxCustomToolNameLen+1))
	}
	if first, dup := r.customAt[p.Name]; dup {
		return nil, toolErr(path+".name", "duplicate custom tool name %q (first at tools[%d])", p.Name, first)
	}
	r.customAt[p.Name] = i
	r.customs = append(r.customs, customRef{path + ".name", p.Name})
	if p.Description == "" {
		return nil, toolErr(path+".description", "is required")
	}
	schema, err := checkInputSchema(path+".input_schema", p.InputSchema)
	if err != nil {
		return nil, err
	}
	if r.schemaBytes += len(schema); r.schemaBytes > maxSchemaBytesTotal {
		return nil, toolErr(path+".input_schema", "the input_schemas of all custom tools must total at most %d bytes (got %d so far)", maxSchemaBytesTotal, r.schemaBytes)
	}
	return &wire.CustomTool{Name: p.Name, Description: p.Description, InputSchema: schema}, nil
}

// checkInputSchema checks the parts of the JSON Schema the API constrains and returns it
// compacted; every other keyword is kept as sent.
func checkInputSchema(path string, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, toolErr(path, "is required")
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return nil, toolErr(path, "must be a JSON Schema object")
	}
	var typ string
	if err := json.Unmarshal(schema["type"], &typ); err != nil || typ != "object" {
		return nil, toolErr(path+".type", "must be \"object\"")
	}
	if props, ok := schema["properties"]; ok && !isNull(props) {
		var m map[string]json.RawMessage
		if json.Unmarshal(props, &m) != nil {
			return nil, toolErr(path+".properties", "must be an object")
		}
	}
	if req, ok := schema["required"]; ok && !isNull(req) {
		var names []string
		if json.Unmarshal(req, &names) != nil {
			return nil, toolErr(path+".required", "must be an array of strings")
		}
	}
	out, err := json.Marshal(raw) // RawMessage marshals compacted
	if err != nil {
		return nil, toolErr(path, "must be valid JSON")
	}
	if len(out) > maxInputSchemaBytes {
		return nil, toolErr(path, "must be at most %d bytes of compact JSON (got %d)", maxInputSchemaBytes, len(out))
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	return strings.TrimSpace(string(raw)) == "null"
}

// crossCheck applies the rules that need the whole array: every declared server is used,
// custom names do not shadow enabled built-ins, url_sources name real custom tools, and the
// total stays within the limit.
func (r *resolver) crossCheck(servers []wire.MCPServer, resolved []wire.Tool) error {
	for i, s := range servers {
		if _, used := r.serverUse[s.Name]; !used {
			return toolErr(fmt.Sprintf("mcp_servers[%d]", i), "MCP server %q is not referenced by any %s in tools", s.Name, wire.ToolTypeMCPToolset)
		}
	}
	eff := NewEffective(resolved)
	for _, c := range r.customs {
		if eff.BuiltIn(c.name).Enabled {
			return toolErr(c.path, "custom tool %q has the name of an enabled built-in tool; rename it or disable the built-in", c.name)
		}
	}
	for _, ref := range r.clientRefs {
		if _, ok := r.customAt[ref.name]; !ok {
			return toolErr(ref.path, "no custom tool named %q in tools", ref.name)
		}
	}
	// Counting rule: each enabled built-in tool counts one, each custom tool one, and each
	// mcp_toolset configs entry one. An MCP server's other tools are unknown until it is
	// contacted, so they cannot be counted here.
	total := len(eff.EnabledBuiltIns()) + len(r.customs) + r.mcpConfigs
	if total > maxTools {
		return toolErr("tools", "at most %d tools are allowed across all toolsets (got %d: each enabled built-in tool, custom tool and MCP tool config counts one)", maxTools, total)
	}
	return nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneUserLocation(l *wire.ToolUserLocation) *wire.ToolUserLocation {
	if l == nil {
		return nil
	}
	return &wire.ToolUserLocation{
		Type:     l.Type,
		City:     clonePtr(l.City),
		Region:   clonePtr(l.Region),
		Country:  clonePtr(l.Country),
		Timezone: clonePtr(l.Timezone),
	}
}

func cloneURLSources(s *wire.ToolURLSources) *wire.ToolURLSources {
	if s == nil {
		return nil
	}
	return &wire.ToolURLSources{
		UserInput:         cloneFilter(s.UserInput),
		ClientToolResults: cloneFilter(s.ClientToolResults),
		ServerToolResults: cloneFilter(s.ServerToolResults),
	}
}

func cloneFilter(f *wire.ToolURLSourceFilter) *wire.ToolURLSourceFilter {
	if f == nil {
		return nil
	}
	return &wire.ToolURLSourceFilter{Type: f.Type, Tools: slices.Clone(f.Tools)}
}

// Setting is how one tool may be used: whether the model is offered it at all, and whether
// each call runs unasked, waits for the user, or is judged by the server.
type Setting struct {
	Enabled bool
	Policy  wire.PermissionPolicy
}

// Effective answers, for one agent's resolved tools, how each built-in and MCP tool is
// configured. The resolved form only lists the entries the client wrote, so a tool without
// an entry follows its toolset's default_config.
type Effective struct {
	toolset *wire.Toolset
	mcp     map[string]*wire.MCPToolset
}

// NewEffective indexes resolved tools (as returned by Resolve or read back from storage).
func NewEffective(resolved []wire.Tool) Effective {
	e := Effective{mcp: map[string]*wire.MCPToolset{}}
	for _, t := range resolved {
		switch {
		case t.Toolset != nil && e.toolset == nil:
			e.toolset = t.Toolset
		case t.MCPToolset != nil:
			e.mcp[t.MCPToolset.MCPServerName] = t.MCPToolset
		}
	}
	return e
}

// BuiltIn reports the setting of a built-in tool. Without an agent toolset, or for a name
// that is not a built-in tool, the tool is disabled.
func (e Effective) BuiltIn(name string) Setting {
	if e.toolset == nil || !IsBuiltIn(name) {
		return Setting{}
	}
	for _, c := range e.toolset.Configs {
		if c.Name == name {
			return Setting{Enabled: c.Enabled, Policy: c.PermissionPolicy}
		}
	}
	return defaultSetting(e.toolset.DefaultConfig)
}

// BuiltInConfig returns the resolved configs entry of a built-in tool, for the web extras;
// ok is false when the client wrote none.
func (e Effective) BuiltInConfig(name string) (cfg wire.ToolConfig, ok bool) {
	if e.toolset == nil {
		return wire.ToolConfig{}, false
	}
	for _, c := range e.toolset.Configs {
		if c.Name == name {
			return c, true
		}
	}
	return wire.ToolConfig{}, false
}

// EnabledBuiltIns lists the enabled built-in tools in documentation order.
func (e Effective) EnabledBuiltIns() []string {
	var names []string
	for _, name := range builtInNames {
		if e.BuiltIn(name).Enabled {
			names = append(names, name)
		}
	}
	return names
}

// MCP reports the setting of one tool of an MCP server. A server without a toolset has no
// usable tools.
func (e Effective) MCP(server, tool string) Setting {
	ts, ok := e.mcp[server]
	if !ok {
		return Setting{}
	}
	for _, c := range ts.Configs {
		if c.Name == tool {
			return Setting{Enabled: c.Enabled, Policy: c.PermissionPolicy}
		}
	}
	return defaultSetting(ts.DefaultConfig)
}

// MCPOffersAny reports whether the toolset of an MCP server can enable any tool: its
// default_config enables tools, or a configs entry does. A server without a toolset offers
// nothing.
func (e Effective) MCPOffersAny(server string) bool {
	ts, ok := e.mcp[server]
	if !ok {
		return false
	}
	return ts.DefaultConfig.Enabled || slices.ContainsFunc(ts.Configs, func(c wire.MCPToolConfig) bool { return c.Enabled })
}

func defaultSetting(d wire.ToolDefaultConfig) Setting {
	return Setting{Enabled: d.Enabled, Policy: d.PermissionPolicy}
}
