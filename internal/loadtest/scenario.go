package loadtest

import (
	"fmt"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// Scenario names what every turn of a run does; the fake model's directives
// (docs/fake-model.md) make the server do it.
type Scenario string

const (
	// Plain is a text message the fake model echoes: one model call.
	Plain Scenario = "plain"
	// Tool is one `bash true` call: two model calls around one tool call.
	Tool Scenario = "tool"
	// Tools3 is three `bash true` calls in one model response.
	Tools3 Scenario = "tools3"
	// Confirm is one bash call under the always_ask policy: the turn parks with
	// requires_action and resumes when the load tool allows the call.
	Confirm Scenario = "confirm"
	// Custom is one call of a custom tool: the turn parks until the load tool posts its result.
	Custom Scenario = "custom"
)

// Scenarios are all the scenarios, in the order the help lists them.
var Scenarios = []Scenario{Plain, Tool, Tools3, Confirm, Custom}

// ParseScenarios reads a comma-separated list of scenario names.
func ParseScenarios(s string) ([]Scenario, error) {
	var out []Scenario
	for name := range strings.SplitSeq(s, ",") {
		sc := Scenario(strings.TrimSpace(name))
		if sc.text() == "" {
			return nil, fmt.Errorf("scenario %q: must be one of plain, tool, tools3, confirm, custom", name)
		}
		out = append(out, sc)
	}
	return out, nil
}

const (
	bashTrue = `/tool bash {"command":"true"}`
	// customToolName is the custom tool of the custom scenario's agent.
	customToolName = "lookup"
)

// text is the user message that starts a turn of the scenario.
func (s Scenario) text() string {
	switch s {
	case Plain:
		return "hello"
	case Tool, Confirm:
		return bashTrue
	case Tools3:
		return bashTrue + "\n" + bashTrue + "\n" + bashTrue
	case Custom:
		return `/tool ` + customToolName + ` {"q":"load"}`
	}
	return ""
}

// tools are the agent's tools for the scenario.
func (s Scenario) tools() []anthropic.BetaAgentNewParamsToolUnion {
	switch s {
	case Tool, Tools3:
		return []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}
	case Confirm:
		return []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			DefaultConfig: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParams{
				PermissionPolicy: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParamsPermissionPolicyUnion{
					OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}}}}}
	case Custom:
		return []anthropic.BetaAgentNewParamsToolUnion{{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
			Name: customToolName, Description: "looks a word up (answered by the load tool)",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{
				Properties: map[string]any{"q": map[string]any{"type": "string"}}}}}}
	}
	return nil
}

// answer is what the client posts when a turn of the scenario parks on the events ids
// (stop_reason.event_ids); nil when the scenario never parks.
func (s Scenario) answer(ids []string) []anthropic.BetaManagedAgentsEventParamsUnion {
	var out []anthropic.BetaManagedAgentsEventParamsUnion
	for _, id := range ids {
		switch s {
		case Confirm:
			out = append(out, anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
				ToolUseID: id, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}})
		case Custom:
			out = append(out, anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
				CustomToolUseID: id,
				Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{
					{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "found"}}}}})
		}
	}
	return out
}

func userMessage(text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
		Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}
}
