package hostpattern

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"Example.COM", "example.com", true},
		{"example.com", "www.example.com", false},
		{"example.com", "badexample.com", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false}, // never the apex
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "a.example.com.evil.org", false},
		{"*.example.com", ".example.com", false}, // an empty label is no host below it
		{"10.0.0.1", "10.0.0.1", true},
		{"*.0.0.1", "10.0.0.1", false}, // a wildcard never matches an IP literal
		{"10.0.0.1", "10.0.0.2", false},
		{"::1", "[::1]", true},
		{"10.0.0.1", "::ffff:10.0.0.1", true},
		{"*", "example.com", false},
	} {
		require.Equal(t, tc.want, Match(tc.pattern, tc.host), "Match(%q, %q)", tc.pattern, tc.host)
	}
}

func TestValidHost(t *testing.T) {
	for h, want := range map[string]bool{
		"example.com": true, "a-b.c0": true, "10.0.0.1": true, "::1": true,
		"": false, ".example.com": false, "a..b": false, "-a.com": false, "a-.com": false,
		"a_b.com": false, "exa mple.com": false, "é.com": false, "a.com:80": false,
		string(make([]byte, 64)) + ".com": false,
	} {
		require.Equal(t, want, ValidHost(h), "ValidHost(%q)", h)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "*.a.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.a.example.com", "*.example.com", false},
		{"*.example.com", "example.com", false},
		{"a.example.com", "*.example.com", false},
		{"a.example.com", "a.example.com", true},
	} {
		require.Equal(t, tc.want, Covers(tc.a, tc.b), "Covers(%q, %q)", tc.a, tc.b)
	}
}

func TestIntersect(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []string
		want []string
	}{
		{"disjoint", []string{"a.com"}, []string{"b.com"}, nil},
		{"equal hosts", []string{"a.com"}, []string{"A.com"}, []string{"a.com"}},
		{"host under a wildcard", []string{"x.a.com", "y.b.com"}, []string{"*.a.com"}, []string{"x.a.com"}},
		{"narrower wildcard wins", []string{"*.com"}, []string{"*.a.com", "b.org"}, []string{"*.a.com"}},
		{"apex not under its wildcard", []string{"a.com"}, []string{"*.a.com"}, nil},
		{"covered results are dropped", []string{"*.a.com", "x.a.com"}, []string{"*.a.com"}, []string{"*.a.com"}},
		{"empty side", nil, []string{"a.com"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Intersect(tc.a, tc.b))
			require.Equal(t, tc.want, Intersect(tc.b, tc.a), "symmetric")
		})
	}
}

// FuzzIntersect checks the intersection against the definition: a host matches the result
// exactly when it matches some pattern of each side.
func FuzzIntersect(f *testing.F) {
	f.Add("*.a.com", "x.a.com", "x.a.com")
	f.Add("a.com", "*.com", "b.a.com")
	f.Add("10.0.0.1", "*.0.0.1", "10.0.0.1")
	f.Fuzz(func(t *testing.T, a, b, host string) {
		host = Normalize(host)
		if !ValidHost(host) {
			return
		}
		got := MatchAny(Intersect([]string{a}, []string{b}), host)
		want := Match(a, host) && Match(b, host)
		if got != want {
			t.Fatalf("host %q: Intersect(%q, %q) matches %t, both match %t", host, a, b, got, want)
		}
	})
}
