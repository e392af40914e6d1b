// Package remote is what the remote sandbox providers (e2b, opensandbox, daytona) share: an
// HTTP client that retries what a provider refused for now (429, 503, and for
// idempotent requests also 500, 502, 504 and transport errors) with bounded backoff, the mapping
// of a provider's status codes onto the sandbox errors (404 → gone, 401/403 → a
// configuration error naming the credential's variable, what is left of 429/5xx after the
// retries → unavailable), and the parsing of a provider's MANAGED_AGENT_* settings with
// messages naming each variable, one JSON call of a provider's API (SendJSON) and the check of
// a sandbox ref. It also holds what the providers' file tools share: the
// shell preamble that confines a path in the sandbox and the errors its verdicts name, and,
// once the bytes are out of the sandbox, matching a listing for FindFiles and lines for
// GrepFiles.
//
// It imports only sandbox besides the standard library, go-retryablehttp and doublestar.
package remote
