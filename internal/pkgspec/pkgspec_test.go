package pkgspec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		spec string
		bad  string // a fragment of the error, "" when the spec is fine
	}{
		{"requests", ""},
		{"requests==2.31.0", ""},
		{"golang.org/x/tools/cmd/goimports@v0.1.0", ""},
		{"pkg=1.2~deb12u1", ""},
		{strings.Repeat("a", MaxLen), ""},
		{"", "empty"},
		{strings.Repeat("a", MaxLen+1), "at most"},
		{"-r", "start with '-'"},
		{"--index-url=http://evil.example/simple", "start with '-'"},
		{"-e.", "start with '-'"},
		{"a b", "spaces"},
		{"a\tb", "spaces"},
		{"a\nb", "spaces"},
		{"a\x7fb", "control"},
		{"a\u0085b", "control"},
	} {
		err := Check(tc.spec)
		if tc.bad == "" {
			require.NoError(t, err, "%q", tc.spec)
			continue
		}
		require.ErrorContains(t, err, tc.bad, "%q", tc.spec)
	}
}
