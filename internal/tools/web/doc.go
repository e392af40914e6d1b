// Package web runs the server-side built-in tools web_fetch and web_search (API.md §3.2 (a)):
// the worker fetches a page or asks a search backend, and hands back content blocks for an
// agent.tool_result (a document with a text source; search_result blocks).
//
// web_fetch dials through internal/netguard, which refuses, at dial time, every address that
// is not public (loopback, private, link-local with the cloud metadata address, CGNAT,
// multicast, unspecified, and IPv6 forms that reach them), so neither a name that resolves to
// one, nor DNS rebinding, nor a redirect reaches the worker's own network unless the
// deployment allows it (FetchConfig.AllowPrivateNetworks). A page's HTML is cut to what its
// text budget needs before it is converted, and conversions run at most GOMAXPROCS at once. web_search speaks to a pluggable Backend; SearXNG's JSON
// API is the one implemented. Both honour an agent's allowed_domains and blocked_domains.
//
// A call never returns a Go error: bad input, refusals, timeouts and backend failures come
// back as a Result with IsError set and a text that names the error code (url_not_allowed,
// url_not_accessible, unsupported_content_type, unavailable, ...).
//
// It imports wire, netguard, the standard library and the HTML libraries (html-to-markdown,
// golang.org/x/net/html); never store, sessions, turns, agent, sandbox, Temporal or
// Kubernetes. It uses net/http, so the agent loop reaches it only through an interface of
// its own (Fetcher.Run and Searcher.Run use wire types alone).
package web
