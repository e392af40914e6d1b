// Package hostpattern matches host names against an environment's allowed_hosts entries:
// bare host names and `*.example.com` wildcards (no scheme, port or path).
//
// A wildcard `*.example.com` matches every host below example.com, however many labels
// deep (a.example.com, a.b.example.com), and never example.com itself: to allow both, list
// both. Matching ignores case and trailing dots. An IP literal is matched only by the
// same address written as an entry, never by a wildcard.
//
// The package is pure: the sandbox spec resolution intersects lists with it, and the egress
// proxy matches requests with it.
package hostpattern

import (
	"net/netip"
	"slices"
	"strings"
)

// Normalize is the form hosts and patterns are compared in: lower case, without trailing
// dots, an IPv6 literal without brackets. It is idempotent, so a pattern Intersect returns
// matches what its inputs matched when a consumer normalizes it again (a fuzzer found
// "0.." and "0" disagreeing when only one dot was stripped per pass).
func Normalize(h string) string {
	h = strings.ToLower(h)
	for {
		prev := h
		h = strings.TrimRight(h, ".")
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if h == prev {
			return h
		}
	}
}

// IsWildcard reports whether p is a `*.domain` pattern.
func IsWildcard(p string) bool { return strings.HasPrefix(p, "*.") && len(p) > 2 }

// ValidHost reports whether h (normalized) is a host name a request may name: an IP
// literal, or dot-separated labels of letters, digits and inner hyphens, each at most 63
// characters, 253 in all.
func ValidHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if !validLabel(label) {
			return false
		}
	}
	return true
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Match reports whether host matches pattern p.
func Match(p, host string) bool {
	p, host = Normalize(p), Normalize(host)
	if addr, err := netip.ParseAddr(host); err == nil {
		want, err := netip.ParseAddr(p)
		return err == nil && want.Unmap() == addr.Unmap()
	}
	if IsWildcard(p) {
		domain := p[1:] // ".example.com"
		return len(host) > len(domain) && strings.HasSuffix(host, domain)
	}
	return p == host
}

// MatchAny reports whether host matches any of patterns.
func MatchAny(patterns []string, host string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return Match(p, host) })
}

// Covers reports whether every host b matches is also matched by a.
func Covers(a, b string) bool {
	a, b = Normalize(a), Normalize(b)
	switch {
	case !IsWildcard(b):
		return Match(a, b)
	case !IsWildcard(a):
		return false // one host never covers the unbounded set below a domain
	}
	// *.d covers *.e when e is d or below it.
	d, e := a[2:], b[2:]
	return e == d || strings.HasSuffix(e, "."+d)
}

// Intersect returns the patterns that match exactly the hosts some pattern of a and some
// pattern of b both match, normalized, sorted, with none covered by another. The
// intersection of two patterns is always one of them or empty: each is a single host or
// the set below a domain.
func Intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			switch {
			case Covers(x, y):
				out = append(out, Normalize(y))
			case Covers(y, x):
				out = append(out, Normalize(x))
			}
		}
	}
	return Minimal(out)
}

// Minimal normalizes patterns and drops duplicates and those another pattern covers, sorted.
func Minimal(patterns []string) []string {
	norm := make([]string, 0, len(patterns))
	for _, p := range patterns {
		norm = append(norm, Normalize(p))
	}
	norm = slices.Compact(slices.Sorted(slices.Values(norm)))
	out := norm[:0:0]
	for i, p := range norm {
		covered := false
		for j, q := range norm {
			if i != j && Covers(q, p) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
