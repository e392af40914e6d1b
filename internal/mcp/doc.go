// Package mcp is the client side of the Model Context Protocol for an agent's mcp_servers
// (API.md §3.2 (b)): it dials a remote MCP server over streamable HTTP (falling back to the
// older HTTP+SSE transport), lists its tools and calls them, turning each result into the
// event content blocks allowed in agent.mcp_tool_result (API.md §5.1).
//
// It owns the connection, authentication (a bearer token), per-call timeouts, the output
// cap and content conversion; it does not decide which tools are enabled or allowed (the
// agent's toolset does) and never logs a token.
//
// It imports only wire, the standard library and the MCP Go SDK: never store, agent,
// sessions, turns or sandbox.
package mcp
