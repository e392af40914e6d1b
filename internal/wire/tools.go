package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Discriminators of the three members of an agent's "tools" array (API.md §3.2).
const (
	ToolTypeAgentToolset = "agent_toolset_20260401"
	ToolTypeMCPToolset   = "mcp_toolset"
	ToolTypeCustom       = "custom"
)

// Names of the built-in tools of agent_toolset_20260401. They double as the optional `type`
// of a toolset configs[] entry.
const (
	ToolNameBash      = "bash"
	ToolNameRead      = "read"
	ToolNameWrite     = "write"
	ToolNameEdit      = "edit"
	ToolNameGlob      = "glob"
	ToolNameGrep      = "grep"
	ToolNameWebFetch  = "web_fetch"
	ToolNameWebSearch = "web_search"
)

// MCPServerTypeURL is the only MCP server transport the API defines.
const MCPServerTypeURL = "url"

// ToolUserLocationApproximate is the only user_location precision web_search accepts.
const ToolUserLocationApproximate = "approximate"

// ToolReferenceType is the discriminator of an entry of an url_sources only/except list.
const ToolReferenceType = "tool_reference"

// Values of a web_fetch url_sources filter's type.
const (
	ToolURLSourceAll    = "all"
	ToolURLSourceNone   = "none"
	ToolURLSourceOnly   = "only"
	ToolURLSourceExcept = "except"
)

// ToolConfigError is a client mistake in the tools or mcp_servers of a request. Error() is
// meant to be shown to API clients verbatim, as the message of a 400 invalid_request_error.
//
// Path names the offending value ("tools[0].configs[1].name"). Decoders of nested objects
// return paths relative to themselves and their callers prepend their own field, so code
// that embeds tools somewhere else (a session's "agent") can prepend its prefix the same way.
type ToolConfigError struct {
	Path string
	Msg  string
}

func (e *ToolConfigError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// PermissionPolicy decides whether a call of a toolset tool runs without asking. On the wire
// it is the object {"type": "<policy>"}; in Go it is the bare type so it compares with ==.
type PermissionPolicy string

// The permission policies the API defines (API.md §3.3).
const (
	PermissionAlwaysAllow PermissionPolicy = "always_allow"
	PermissionAlwaysAsk   PermissionPolicy = "always_ask"
	PermissionAuto        PermissionPolicy = "auto"
)

// Known reports whether p is one of the policies the API defines. Decoding accepts any
// string so that validation can report an unknown policy with the full field path.
func (p PermissionPolicy) Known() bool {
	switch p {
	case PermissionAlwaysAllow, PermissionAlwaysAsk, PermissionAuto:
		return true
	}
	return false
}

// MarshalJSON writes the object form.
func (p PermissionPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Type string `json:"type"`
	}{string(p)})
}

// UnmarshalJSON reads the object form; `type` is required.
func (p *PermissionPolicy) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type")
	if err != nil {
		return err
	}
	var typ string
	if err := obj.string("type", &typ); err != nil {
		return err
	}
	if typ == "" {
		return toolErr("type", "is required")
	}
	*p = PermissionPolicy(typ)
	return nil
}

// ---- Request side -------------------------------------------------------------------------

// ToolParam is one element of the "tools" array of an agent create or update body. Exactly
// one member is set. Decoding is strict and only structural (JSON types, unknown fields,
// the discriminator); the rules live in package tools.
type ToolParam struct {
	Toolset    *ToolsetParam
	MCPToolset *MCPToolsetParam
	Custom     *CustomToolParam
}

// Type returns the discriminator of the member that is set, or "" if none is.
func (p ToolParam) Type() string {
	switch {
	case p.Toolset != nil:
		return ToolTypeAgentToolset
	case p.MCPToolset != nil:
		return ToolTypeMCPToolset
	case p.Custom != nil:
		return ToolTypeCustom
	}
	return ""
}

// MarshalJSON writes the member that is set.
func (p ToolParam) MarshalJSON() ([]byte, error) {
	switch {
	case p.Toolset != nil:
		return json.Marshal(p.Toolset)
	case p.MCPToolset != nil:
		return json.Marshal(p.MCPToolset)
	case p.Custom != nil:
		return json.Marshal(p.Custom)
	}
	return nil, errors.New("wire: ToolParam has no member set")
}

// UnmarshalJSON dispatches on `type`.
func (p *ToolParam) UnmarshalJSON(data []byte) error {
	typ, err := toolDiscriminator(data)
	if err != nil {
		return err
	}
	*p = ToolParam{}
	switch typ {
	case ToolTypeAgentToolset:
		p.Toolset = new(ToolsetParam)
		return p.Toolset.UnmarshalJSON(data)
	case ToolTypeMCPToolset:
		p.MCPToolset = new(MCPToolsetParam)
		return p.MCPToolset.UnmarshalJSON(data)
	case ToolTypeCustom:
		p.Custom = new(CustomToolParam)
		return p.Custom.UnmarshalJSON(data)
	}
	return toolErr("type", fmt.Sprintf("unknown tool type %q (expected %s, %s or %s)",
		typ, ToolTypeAgentToolset, ToolTypeMCPToolset, ToolTypeCustom))
}

// ToolDefaultConfigParam is the optional default_config of a toolset. Nil fields inherit the
// toolset's defaults.
type ToolDefaultConfigParam struct {
	Enabled          *bool             `json:"enabled,omitempty"`
	PermissionPolicy *PermissionPolicy `json:"permission_policy,omitempty"`
}

// UnmarshalJSON is strict; null members count as omitted.
func (c *ToolDefaultConfigParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "enabled", "permission_policy")
	if err != nil {
		return err
	}
	*c = ToolDefaultConfigParam{}
	if c.Enabled, err = obj.bool("enabled"); err != nil {
		return err
	}
	c.PermissionPolicy, err = toolNested[PermissionPolicy](obj, "permission_policy")
	return err
}

// ToolsetParam is the request form of agent_toolset_20260401.
type ToolsetParam struct {
	DefaultConfig *ToolDefaultConfigParam `json:"default_config,omitempty"`
	Configs       []ToolConfigParam       `json:"configs,omitempty"`
}

// MarshalJSON adds the discriminator.
func (p ToolsetParam) MarshalJSON() ([]byte, error) {
	type fields ToolsetParam
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeAgentToolset, fields(p)})
}

// UnmarshalJSON is strict; `type`, when present, must be agent_toolset_20260401.
func (p *ToolsetParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "default_config", "configs")
	if err != nil {
		return err
	}
	if err := obj.constant("type", ToolTypeAgentToolset); err != nil {
		return err
	}
	*p = ToolsetParam{}
	if p.DefaultConfig, err = toolNested[ToolDefaultConfigParam](obj, "default_config"); err != nil {
		return err
	}
	p.Configs, err = toolList[ToolConfigParam](obj, "configs")
	return err
}

// ToolConfigParam is one configs[] entry of agent_toolset_20260401. The web fields only
// apply to web_fetch and web_search; nil means not set, and an empty non-nil domain list is
// kept apart from nil because the API rejects `[]` (send null or omit instead).
type ToolConfigParam struct {
	Name             string            `json:"name"`
	Type             string            `json:"type,omitempty"`
	Enabled          *bool             `json:"enabled,omitempty"`
	PermissionPolicy *PermissionPolicy `json:"permission_policy,omitempty"`
	AllowedDomains   []string          `json:"allowed_domains,omitzero"`
	BlockedDomains   []string          `json:"blocked_domains,omitzero"`
	MaxContentTokens *int64            `json:"max_content_tokens,omitempty"`
	UserLocation     *ToolUserLocation `json:"user_location,omitempty"`
	URLSources       *ToolURLSources   `json:"url_sources,omitempty"`
}

// UnmarshalJSON is strict; null members count as omitted.
func (c *ToolConfigParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "name", "type", "enabled", "permission_policy",
		"allowed_domains", "blocked_domains", "max_content_tokens", "user_location", "url_sources")
	if err != nil {
		return err
	}
	*c = ToolConfigParam{}
	return toolFirstErr(
		obj.string("name", &c.Name),
		obj.string("type", &c.Type),
		obj.boolInto("enabled", &c.Enabled),
		toolNestedInto(obj, "permission_policy", &c.PermissionPolicy),
		obj.stringsInto("allowed_domains", &c.AllowedDomains),
		obj.stringsInto("blocked_domains", &c.BlockedDomains),
		obj.int64Into("max_content_tokens", &c.MaxContentTokens),
		toolNestedInto(obj, "user_location", &c.UserLocation),
		toolNestedInto(obj, "url_sources", &c.URLSources),
	)
}

// MCPToolsetParam is the request form of mcp_toolset.
type MCPToolsetParam struct {
	MCPServerName string                  `json:"mcp_server_name"`
	DefaultConfig *ToolDefaultConfigParam `json:"default_config,omitempty"`
	Configs       []MCPToolConfigParam    `json:"configs,omitempty"`
}

// MarshalJSON adds the discriminator.
func (p MCPToolsetParam) MarshalJSON() ([]byte, error) {
	type fields MCPToolsetParam
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeMCPToolset, fields(p)})
}

// UnmarshalJSON is strict; `type`, when present, must be mcp_toolset.
func (p *MCPToolsetParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "mcp_server_name", "default_config", "configs")
	if err != nil {
		return err
	}
	if err := obj.constant("type", ToolTypeMCPToolset); err != nil {
		return err
	}
	*p = MCPToolsetParam{}
	if err := obj.string("mcp_server_name", &p.MCPServerName); err != nil {
		return err
	}
	if p.DefaultConfig, err = toolNested[ToolDefaultConfigParam](obj, "default_config"); err != nil {
		return err
	}
	p.Configs, err = toolList[MCPToolConfigParam](obj, "configs")
	return err
}

// MCPToolConfigParam is one configs[] entry of an mcp_toolset. Unlike a built-in config it
// has no `type`: MCP tool names are whatever the server reports.
type MCPToolConfigParam struct {
	Name             string            `json:"name"`
	Enabled          *bool             `json:"enabled,omitempty"`
	PermissionPolicy *PermissionPolicy `json:"permission_policy,omitempty"`
}

// UnmarshalJSON is strict; null members count as omitted.
func (c *MCPToolConfigParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "name", "enabled", "permission_policy")
	if err != nil {
		return err
	}
	*c = MCPToolConfigParam{}
	return toolFirstErr(
		obj.string("name", &c.Name),
		obj.boolInto("enabled", &c.Enabled),
		toolNestedInto(obj, "permission_policy", &c.PermissionPolicy),
	)
}

// CustomToolParam is the request form of a custom (client-executed) tool. InputSchema is kept
// as raw JSON so that every JSON-Schema keyword the client sent survives the echo.
type CustomToolParam struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// MarshalJSON adds the discriminator.
func (p CustomToolParam) MarshalJSON() ([]byte, error) {
	type fields CustomToolParam
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeCustom, fields(p)})
}

// UnmarshalJSON is strict at the top level; the schema's contents are checked by package tools.
func (p *CustomToolParam) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "name", "description", "input_schema")
	if err != nil {
		return err
	}
	if err := obj.constant("type", ToolTypeCustom); err != nil {
		return err
	}
	*p = CustomToolParam{}
	if err := obj.string("name", &p.Name); err != nil {
		return err
	}
	if err := obj.string("description", &p.Description); err != nil {
		return err
	}
	if raw, ok := obj.present("input_schema"); ok {
		p.InputSchema = slices.Clone(raw)
	}
	return nil
}

// MCPServer is one element of an agent's mcp_servers, in requests and responses alike.
type MCPServer struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// UnmarshalJSON is strict; the values are checked by package tools.
func (s *MCPServer) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "name", "url")
	if err != nil {
		return err
	}
	*s = MCPServer{}
	return toolFirstErr(
		obj.string("type", &s.Type),
		obj.string("name", &s.Name),
		obj.string("url", &s.URL),
	)
}

// ToolUserLocation localises web_search results. The optional members marshal as null when
// unset, as the API echoes them.
type ToolUserLocation struct {
	Type     string  `json:"type"`
	City     *string `json:"city"`
	Region   *string `json:"region"`
	Country  *string `json:"country"`
	Timezone *string `json:"timezone"`
}

// UnmarshalJSON is strict; null members count as omitted.
func (l *ToolUserLocation) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "city", "region", "country", "timezone")
	if err != nil {
		return err
	}
	*l = ToolUserLocation{}
	return toolFirstErr(
		obj.string("type", &l.Type),
		obj.stringInto("city", &l.City),
		obj.stringInto("region", &l.Region),
		obj.stringInto("country", &l.Country),
		obj.stringInto("timezone", &l.Timezone),
	)
}

// ToolURLSources says which sources may contribute URLs that web_fetch fetches. A nil member
// is unset, which allows every URL from that source, and marshals as null.
type ToolURLSources struct {
	UserInput         *ToolURLSourceFilter `json:"user_input"`
	ClientToolResults *ToolURLSourceFilter `json:"client_tool_results"`
	ServerToolResults *ToolURLSourceFilter `json:"server_tool_results"`
}

// UnmarshalJSON is strict; null members count as unset.
func (s *ToolURLSources) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "user_input", "client_tool_results", "server_tool_results")
	if err != nil {
		return err
	}
	*s = ToolURLSources{}
	return toolFirstErr(
		toolNestedInto(obj, "user_input", &s.UserInput),
		toolNestedInto(obj, "client_tool_results", &s.ClientToolResults),
		toolNestedInto(obj, "server_tool_results", &s.ServerToolResults),
	)
}

// ToolURLSourceFilter is one url_sources member. Requests may use the shorthand strings
// "all" and "none"; decoding turns them into the object form, which is what is echoed.
type ToolURLSourceFilter struct {
	Type  string          `json:"type"`
	Tools []ToolReference `json:"tools,omitempty"`
}

// UnmarshalJSON accepts the shorthand and the strict object form.
func (f *ToolURLSourceFilter) UnmarshalJSON(data []byte) error {
	var short string
	if json.Unmarshal(data, &short) == nil {
		if short != ToolURLSourceAll && short != ToolURLSourceNone {
			return toolErr("", fmt.Sprintf("unknown shorthand %q (expected %q, %q or an object)",
				short, ToolURLSourceAll, ToolURLSourceNone))
		}
		*f = ToolURLSourceFilter{Type: short}
		return nil
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || trimmed[0] != '{' {
		return toolErr("", fmt.Sprintf("must be %q, %q or an object", ToolURLSourceAll, ToolURLSourceNone))
	}
	obj, err := toolObjectOnly(data, "type", "tools")
	if err != nil {
		return err
	}
	*f = ToolURLSourceFilter{}
	if err := obj.string("type", &f.Type); err != nil {
		return err
	}
	f.Tools, err = toolList[ToolReference](obj, "tools")
	return err
}

// ToolReference names one tool in an url_sources only/except list.
type ToolReference struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// UnmarshalJSON is strict.
func (r *ToolReference) UnmarshalJSON(data []byte) error {
	obj, err := toolObjectOnly(data, "type", "name")
	if err != nil {
		return err
	}
	*r = ToolReference{}
	return toolFirstErr(obj.string("type", &r.Type), obj.string("name", &r.Name))
}

// DecodeToolParams decodes the "tools" value of a request body. Absent or null means no
// tools. Errors are *ToolConfigError with paths rooted at "tools".
func DecodeToolParams(raw json.RawMessage) ([]ToolParam, error) {
	return toolRootList[ToolParam](raw, "tools")
}

// DecodeMCPServers decodes the "mcp_servers" value of a request body. Absent or null means
// no servers. Errors are *ToolConfigError with paths rooted at "mcp_servers".
func DecodeMCPServers(raw json.RawMessage) ([]MCPServer, error) {
	return toolRootList[MCPServer](raw, "mcp_servers")
}

// ---- Response side (resolved; what the API echoes and what is stored) ---------------------

// Tool is one element of the resolved "tools" array of an agent. Exactly one member is set.
type Tool struct {
	Toolset    *Toolset
	MCPToolset *MCPToolset
	Custom     *CustomTool
}

// Type returns the discriminator of the member that is set, or "" if none is.
func (t Tool) Type() string {
	switch {
	case t.Toolset != nil:
		return ToolTypeAgentToolset
	case t.MCPToolset != nil:
		return ToolTypeMCPToolset
	case t.Custom != nil:
		return ToolTypeCustom
	}
	return ""
}

// MarshalJSON writes the member that is set.
func (t Tool) MarshalJSON() ([]byte, error) {
	switch {
	case t.Toolset != nil:
		return json.Marshal(t.Toolset)
	case t.MCPToolset != nil:
		return json.Marshal(t.MCPToolset)
	case t.Custom != nil:
		return json.Marshal(t.Custom)
	}
	return nil, errors.New("wire: Tool has no member set")
}

// UnmarshalJSON reads a resolved tool back from storage. Only the request types need
// path-naming errors, so this dispatches on `type` and lets encoding/json do the rest.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("tool: %w", err)
	}
	*t = Tool{}
	switch head.Type {
	case ToolTypeAgentToolset:
		t.Toolset = new(Toolset)
		return json.Unmarshal(data, t.Toolset)
	case ToolTypeMCPToolset:
		t.MCPToolset = new(MCPToolset)
		return json.Unmarshal(data, t.MCPToolset)
	case ToolTypeCustom:
		t.Custom = new(CustomTool)
		return json.Unmarshal(data, t.Custom)
	}
	return fmt.Errorf("tool: unknown type %q", head.Type)
}

// ToolDefaultConfig is a toolset's fully populated default_config.
type ToolDefaultConfig struct {
	Enabled          bool             `json:"enabled"`
	PermissionPolicy PermissionPolicy `json:"permission_policy"`
}

// Toolset is the resolved agent_toolset_20260401. Configs holds only the entries the client
// supplied (API.md §15 row 29); a tool without an entry follows DefaultConfig.
type Toolset struct {
	DefaultConfig ToolDefaultConfig `json:"default_config"`
	Configs       []ToolConfig      `json:"configs"`
}

// MarshalJSON adds the discriminator and writes configs as [] rather than null.
func (t Toolset) MarshalJSON() ([]byte, error) {
	type fields Toolset
	if t.Configs == nil {
		t.Configs = []ToolConfig{}
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeAgentToolset, fields(t)})
}

// ToolConfig is a resolved built-in configs[] entry. It marshals with `type` equal to Name
// and with exactly the extras of its tool: web_fetch echoes url_sources and
// max_content_tokens (null when unset), web_search echoes user_location (null when unset),
// and both echo whichever domain list was set.
type ToolConfig struct {
	Name             string            `json:"name"`
	Enabled          bool              `json:"enabled"`
	PermissionPolicy PermissionPolicy  `json:"permission_policy"`
	AllowedDomains   []string          `json:"allowed_domains,omitempty"`
	BlockedDomains   []string          `json:"blocked_domains,omitempty"`
	MaxContentTokens *int64            `json:"max_content_tokens,omitempty"`
	UserLocation     *ToolUserLocation `json:"user_location,omitempty"`
	URLSources       *ToolURLSources   `json:"url_sources,omitempty"`
}

// toolConfigCommon is the part of a resolved configs[] entry every built-in tool shares.
type toolConfigCommon struct {
	Name             string           `json:"name"`
	Type             string           `json:"type"`
	Enabled          bool             `json:"enabled"`
	PermissionPolicy PermissionPolicy `json:"permission_policy"`
}

// MarshalJSON writes the entry in the shape of its tool (see ToolConfig).
func (c ToolConfig) MarshalJSON() ([]byte, error) {
	common := toolConfigCommon{Name: c.Name, Type: c.Name, Enabled: c.Enabled, PermissionPolicy: c.PermissionPolicy}
	switch c.Name {
	case ToolNameWebFetch:
		return json.Marshal(struct {
			toolConfigCommon
			AllowedDomains   []string        `json:"allowed_domains,omitempty"`
			BlockedDomains   []string        `json:"blocked_domains,omitempty"`
			MaxContentTokens *int64          `json:"max_content_tokens"`
			URLSources       *ToolURLSources `json:"url_sources"`
		}{common, c.AllowedDomains, c.BlockedDomains, c.MaxContentTokens, c.URLSources})
	case ToolNameWebSearch:
		return json.Marshal(struct {
			toolConfigCommon
			AllowedDomains []string          `json:"allowed_domains,omitempty"`
			BlockedDomains []string          `json:"blocked_domains,omitempty"`
			UserLocation   *ToolUserLocation `json:"user_location"`
		}{common, c.AllowedDomains, c.BlockedDomains, c.UserLocation})
	}
	return json.Marshal(common)
}

// MCPToolset is the resolved mcp_toolset.
type MCPToolset struct {
	MCPServerName string            `json:"mcp_server_name"`
	DefaultConfig ToolDefaultConfig `json:"default_config"`
	Configs       []MCPToolConfig   `json:"configs"`
}

// MarshalJSON adds the discriminator and writes configs as [] rather than null.
func (t MCPToolset) MarshalJSON() ([]byte, error) {
	type fields MCPToolset
	if t.Configs == nil {
		t.Configs = []MCPToolConfig{}
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeMCPToolset, fields(t)})
}

// MCPToolConfig is a resolved mcp_toolset configs[] entry.
type MCPToolConfig struct {
	Name             string           `json:"name"`
	Enabled          bool             `json:"enabled"`
	PermissionPolicy PermissionPolicy `json:"permission_policy"`
}

// CustomTool is the resolved custom tool; InputSchema is the client's schema, compacted.
type CustomTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MarshalJSON adds the discriminator.
func (t CustomTool) MarshalJSON() ([]byte, error) {
	type fields CustomTool
	return json.Marshal(struct {
		Type string `json:"type"`
		fields
	}{ToolTypeCustom, fields(t)})
}

// ---- Strict decoding helpers --------------------------------------------------------------
//
// encoding/json cannot reject unknown fields below a custom UnmarshalJSON with a path, nor
// say which array element a type error came from, so the request types decode member by
// member through toolObject and every error carries the path of its field.

// toolObject is a JSON object whose members are decoded one at a time.
type toolObject map[string]json.RawMessage

// toolErr builds an error at a path relative to the value being decoded.
func toolErr(path, msg string) error {
	return &ToolConfigError{Path: path, Msg: msg}
}

// toolErrAt puts prefix in front of the path of a nested decoding error.
func toolErrAt(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var te *ToolConfigError
	if prefix == "" {
		return err
	}
	if !errors.As(err, &te) {
		return &ToolConfigError{Path: prefix, Msg: err.Error()}
	}
	switch {
	case te.Path == "":
		return &ToolConfigError{Path: prefix, Msg: te.Msg}
	case te.Path[0] == '[':
		return &ToolConfigError{Path: prefix + te.Path, Msg: te.Msg}
	}
	return &ToolConfigError{Path: prefix + "." + te.Path, Msg: te.Msg}
}

// toolObjectOnly decodes an object and rejects members outside allowed. Unknown members are
// reported in sorted order so that the message does not depend on map iteration.
func toolObjectOnly(data []byte, allowed ...string) (toolObject, error) {
	var obj toolObject
	if toolIsNull(data) || json.Unmarshal(data, &obj) != nil {
		return nil, toolErr("", "must be an object")
	}
	var unknown []string
	for key := range obj {
		if !slices.Contains(allowed, key) {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, toolErr(unknown[0], "unknown field")
	}
	return obj, nil
}

// toolDiscriminator returns the required string `type` of a union member.
func toolDiscriminator(data []byte) (string, error) {
	var obj toolObject
	if toolIsNull(data) || json.Unmarshal(data, &obj) != nil {
		return "", toolErr("", "must be an object")
	}
	var typ string
	if err := obj.string("type", &typ); err != nil {
		return "", err
	}
	if typ == "" {
		return "", toolErr("type", "is required")
	}
	return typ, nil
}

func toolIsNull(data []byte) bool {
	return bytes.Equal(bytes.TrimSpace(data), []byte("null"))
}

// toolFirstErr returns the first failure of members decoded in field order.
func toolFirstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// present returns a member's raw value unless it is absent or null, which the API treats alike.
func (o toolObject) present(key string) (json.RawMessage, bool) {
	raw, ok := o[key]
	if !ok || toolIsNull(raw) {
		return nil, false
	}
	return raw, true
}

// constant checks a discriminator that is optional here because the caller already dispatched on it.
func (o toolObject) constant(key, want string) error {
	var got string
	if err := o.string(key, &got); err != nil {
		return err
	}
	if got != "" && got != want {
		return toolErr(key, fmt.Sprintf("must be %q", want))
	}
	return nil
}

func (o toolObject) string(key string, dst *string) error {
	raw, ok := o.present(key)
	if !ok {
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return toolErr(key, "must be a string")
	}
	return nil
}

func (o toolObject) stringInto(key string, dst **string) error {
	if _, ok := o.present(key); !ok {
		return nil
	}
	*dst = new(string)
	return o.string(key, *dst)
}

func (o toolObject) bool(key string) (*bool, error) {
	raw, ok := o.present(key)
	if !ok {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return nil, toolErr(key, "must be a boolean")
	}
	return &b, nil
}

func (o toolObject) boolInto(key string, dst **bool) (err error) {
	*dst, err = o.bool(key)
	return err
}

func (o toolObject) int64Into(key string, dst **int64) error {
	raw, ok := o.present(key)
	if !ok {
		return nil
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return toolErr(key, "must be an integer")
	}
	*dst = &n
	return nil
}

// stringsInto leaves dst nil when the member is absent or null and sets a non-nil empty slice
// for [], so that validation can reject the empty list.
func (o toolObject) stringsInto(key string, dst *[]string) error {
	raw, ok := o.present(key)
	if !ok {
		return nil
	}
	list := []string{}
	if json.Unmarshal(raw, &list) != nil {
		return toolErr(key, "must be an array of strings")
	}
	*dst = list
	return nil
}

// toolDecoder is a pointer to a type with a path-reporting UnmarshalJSON.
type toolDecoder[T any] interface {
	*T
	json.Unmarshaler
}

// toolNested decodes an optional object member; nil means absent or null.
func toolNested[T any, P toolDecoder[T]](o toolObject, key string) (*T, error) {
	raw, ok := o.present(key)
	if !ok {
		return nil, nil
	}
	v := new(T)
	if err := P(v).UnmarshalJSON(raw); err != nil {
		return nil, toolErrAt(key, err)
	}
	return v, nil
}

func toolNestedInto[T any, P toolDecoder[T]](o toolObject, key string, dst **T) (err error) {
	*dst, err = toolNested[T, P](o, key)
	return err
}

// toolList decodes an optional array member; nil means absent or null.
func toolList[T any, P toolDecoder[T]](o toolObject, key string) ([]T, error) {
	raw, ok := o.present(key)
	if !ok {
		return nil, nil
	}
	list, err := toolRootList[T, P](raw, "")
	if err != nil {
		return nil, toolErrAt(key, err)
	}
	return list, nil
}

// toolRootList decodes an array whose elements decode themselves, naming the failing index.
func toolRootList[T any, P toolDecoder[T]](raw json.RawMessage, path string) ([]T, error) {
	if len(raw) == 0 || toolIsNull(raw) {
		return nil, nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, toolErr(path, "must be an array")
	}
	list := make([]T, len(elems))
	for i, elem := range elems {
		if err := P(&list[i]).UnmarshalJSON(elem); err != nil {
			return nil, toolErrAt(fmt.Sprintf("%s[%d]", path, i), err)
		}
	}
	return list, nil
}
