package mcpurl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{in: "https://mcp.example.com/sse", want: "https://mcp.example.com/sse"},
		{in: "HTTPS://MCP.Example.COM/sse", want: "https://mcp.example.com/sse"},
		{in: "https://mcp.example.com:443/sse", want: "https://mcp.example.com/sse"},
		{in: "http://mcp.example.com:80/", want: "http://mcp.example.com"},
		{in: "http://mcp.example.com:443/", want: "http://mcp.example.com:443"},
		{in: "https://mcp.example.com:8443/mcp/", want: "https://mcp.example.com:8443/mcp"},
		{in: "https://mcp.example.com/mcp#frag", want: "https://mcp.example.com/mcp"},
		{in: "https://mcp.example.com/mcp?tenant=A", want: "https://mcp.example.com/mcp?tenant=A"},
		{in: "https://mcp.example.com/MCP", want: "https://mcp.example.com/MCP"},
		{in: "  https://mcp.example.com  ", want: "https://mcp.example.com"},
		{in: "https://[::1]:443/x/", want: "https://[::1]/x"},
		{in: "https://[::1]:8080/x/", want: "https://[::1]:8080/x"},
		{in: "ftp://mcp.example.com", err: "http or https"},
		{in: "mcp.example.com/sse", err: "http or https"},
		{in: "https://", err: "host"},
		{in: "https://user:pw@mcp.example.com", err: "user information"},
		{in: "://bad", err: "URL"},
	} {
		got, err := Normalize(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://alice:pw@mcp.example.com:8443/mcp/secret-key?token=x": "https://mcp.example.com:8443",
		"http://127.0.0.1:9/mcp": "http://127.0.0.1:9",
		"%zz":                    "(unparsable URL)",
	} {
		require.Equal(t, want, Origin(raw), raw)
	}
}
