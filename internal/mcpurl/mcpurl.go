// Package mcpurl normalizes MCP server URLs so a vault credential matches a server however
// its URL is spelled. Pure; it imports only the standard library.
package mcpurl

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// Normalize returns the form two URLs of one MCP server share:
//   - the scheme (http or https only) and host are lower-cased;
//   - the default port (80 for http, 443 for https) is dropped;
//   - a trailing slash of the path is dropped ("https://h/" is "https://h");
//   - the fragment is dropped; the query and the path's case are kept;
//   - user information is refused.
func Normalize(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", errors.New("must be a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", errors.New("must be an http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", errors.New("must have a host")
	}
	if u.User != nil {
		return "", errors.New("must not carry user information")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	out := url.URL{Scheme: scheme, Host: hostport, Path: strings.TrimRight(u.Path, "/"), RawPath: strings.TrimRight(u.RawPath, "/"), RawQuery: u.RawQuery}
	return out.String(), nil
}

// Origin is the scheme and host of a URL, for messages and logs: a URL's user information,
// path or query may carry a secret. A URL that does not parse is "(unparsable URL)".
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}
