package egress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Policy is what one sandbox may reach through the proxy.
type Policy struct {
	// Sandbox names the sandbox in the proxy's log.
	Sandbox string
	// Hosts are allowed_hosts patterns (hostpattern): exact names, IP literals, `*.domain`.
	Hosts []string
	// Client, when valid, is the only place the credentials work from: the sandbox's own
	// session network. A credential that leaks (printed by an agent, shown in an installer's
	// output) is then of no use to another sandbox, which sits on another network.
	Client netip.Prefix
}

// The proxy is stateless: a sandbox's policy travels in the user name of its proxy
// credentials, and the password is an HMAC of that user name under the deployment's key, so
// a sandbox can neither widen its list nor forge another's, and a restarted proxy (or a
// second one) needs nothing but the key.
const (
	userPrefix      = "ma1."
	boundUserPrefix = "ma2." // the policy carries a Client prefix (its second line)
	macContext      = "managed-agents egress proxy v1\n"
)

// MinKeyBytes is the shortest key the proxy accepts.
const MinKeyBytes = 32

// MaxPolicyBytes bounds the sandbox name and hosts a policy carries: its credentials travel
// in every request's Proxy-Authorization header, which DefaultMaxHeaderBytes bounds. That is
// some 300 host names of 30 characters.
const MaxPolicyBytes = 10 << 10

// CheckPolicy refuses a policy too long for the proxy's header limit.
func CheckPolicy(p Policy) error {
	n := len(p.Sandbox)
	if p.Client.IsValid() {
		n += len(p.Client.String()) + 1
	}
	for _, h := range p.Hosts {
		n += len(h) + 1
	}
	if n > MaxPolicyBytes {
		return fmt.Errorf("the sandbox's host list is too long for the egress proxy: %d bytes, at most %d (%d hosts)", n, MaxPolicyBytes, len(p.Hosts))
	}
	return nil
}

// Credentials returns the proxy user name and password that carry p.
func Credentials(key []byte, p Policy) (user, password string) {
	if p.Client.IsValid() {
		user = boundUserPrefix + base64.RawURLEncoding.EncodeToString([]byte(p.Sandbox+"\n"+p.Client.String()+"\n"+strings.Join(p.Hosts, "\n")))
	} else {
		user = userPrefix + base64.RawURLEncoding.EncodeToString([]byte(p.Sandbox+"\n"+strings.Join(p.Hosts, "\n")))
	}
	return user, sign(key, user)
}

func sign(key []byte, user string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(macContext))
	mac.Write([]byte(user))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// errBadCredentials is every credential failure: the proxy says no more than that.
var errBadCredentials = errors.New("invalid egress proxy credentials")

// Verify returns the policy of credentials Credentials made under key.
func Verify(key []byte, user, password string) (Policy, error) {
	bound := strings.HasPrefix(user, boundUserPrefix)
	if !hmac.Equal([]byte(sign(key, user)), []byte(password)) || !(bound || strings.HasPrefix(user, userPrefix)) {
		return Policy{}, errBadCredentials
	}
	raw, err := base64.RawURLEncoding.DecodeString(user[len(userPrefix):]) // both prefixes are 4 bytes
	if err != nil {
		return Policy{}, fmt.Errorf("%w: %w", errBadCredentials, err)
	}
	lines := strings.Split(string(raw), "\n")
	p := Policy{Sandbox: lines[0]}
	lines = lines[1:]
	if bound {
		if len(lines) == 0 {
			return Policy{}, errBadCredentials
		}
		if p.Client, err = netip.ParsePrefix(lines[0]); err != nil {
			return Policy{}, fmt.Errorf("%w: %w", errBadCredentials, err)
		}
		lines = lines[1:]
	}
	for _, h := range lines {
		if h != "" {
			p.Hosts = append(p.Hosts, h)
		}
	}
	return p, nil
}
