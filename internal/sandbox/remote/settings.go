package remote

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Settings reads a provider's MANAGED_AGENT_* variables from a map (app hands over those a
// provider declares) and collects every problem, each naming its variable, for Err.
type Settings struct {
	env  map[string]string
	errs []error
}

// NewSettings reads from env (nil: nothing set).
func NewSettings(env map[string]string) *Settings { return &Settings{env: env} }

// Err is every problem found so far, or nil.
func (s *Settings) Err() error { return errors.Join(s.errs...) }

func (s *Settings) fail(name, v, format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf("%s=%q: %s", name, v, fmt.Sprintf(format, args...)))
}

// String is the variable's value, or def when it is unset.
func (s *Settings) String(name, def string) string {
	if v := strings.TrimSpace(s.env[name]); v != "" {
		return v
	}
	return def
}

// Required is the variable's value; unset is a problem whose message says why it is needed.
func (s *Settings) Required(name, why string) string {
	v := s.String(name, "")
	if v == "" {
		s.errs = append(s.errs, fmt.Errorf("%s is not set: %s", name, why))
	}
	return v
}

// URL parses an http or https URL (def when unset; def "" and unset gives nil) and drops a
// trailing slash, so paths join onto it.
func (s *Settings) URL(name, def string) *url.URL {
	v := s.String(name, def)
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		s.fail(name, v, "must be an http or https URL such as %s", orExample(def, "https://api.example.com"))
		return nil
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u
}

// Duration parses a Go duration of at least lo (def when unset).
func (s *Settings) Duration(name string, def, lo time.Duration) time.Duration {
	v := s.String(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo {
		s.fail(name, v, "must be a duration of at least %s, such as %s", lo, def)
		return def
	}
	return d
}

// Int parses an integer from lo to hi (def when unset).
func (s *Settings) Int(name string, def, lo, hi int) int {
	v := s.String(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		s.fail(name, v, "must be a whole number from %d to %d", lo, hi)
		return def
	}
	return n
}

// Bool parses true/false, 1/0, yes/no (def when unset).
func (s *Settings) Bool(name string, def bool) bool {
	v := strings.ToLower(s.String(name, ""))
	switch v {
	case "":
		return def
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	s.fail(name, v, "must be true or false")
	return def
}

func orExample(def, example string) string {
	if def != "" {
		return def
	}
	return example
}
