package egress

import (
	"strings"
	"testing"
)

// FuzzCredentials: what Credentials signs, Verify returns unchanged; any other password fails.
func FuzzCredentials(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add("ma-0123", "a.com,*.b.org", "x")
	f.Fuzz(func(t *testing.T, sandbox, hosts, tamper string) {
		if strings.Contains(sandbox, "\n") || strings.Contains(hosts, "\n") {
			return
		}
		var list []string
		for _, h := range strings.Split(hosts, ",") {
			if h != "" {
				list = append(list, h)
			}
		}
		user, password := Credentials(key, Policy{Sandbox: sandbox, Hosts: list})
		p, err := Verify(key, user, password)
		if err != nil || p.Sandbox != sandbox || strings.Join(p.Hosts, ",") != strings.Join(list, ",") {
			t.Fatalf("round trip of %q %q: %+v, %v", sandbox, list, p, err)
		}
		if tamper != "" {
			if _, err := Verify(key, user, password+tamper); err == nil {
				t.Fatalf("a tampered password %q was accepted", password+tamper)
			}
			if _, err := Verify(key, user+tamper, password); err == nil {
				t.Fatalf("a tampered user %q was accepted", user+tamper)
			}
		}
	})
}
