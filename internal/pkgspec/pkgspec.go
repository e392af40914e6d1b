// Package pkgspec is the one rule for an environment's package specs, shared by the API,
// which refuses a bad spec when the environment is created, and the sandboxes, which refuse
// it again before a package manager sees it: both must agree, or an environment the API took
// fails only when its first sandbox is built.
package pkgspec

import (
	"errors"
	"strings"
)

// MaxLen is the longest spec in bytes.
const MaxLen = 512

// Check refuses a spec no package manager could be given safely: empty, longer than MaxLen,
// starting with '-' (the manager would read it as an option: `pip install --index-url=…`),
// or holding whitespace or control characters (the specs are arguments, never parsed by a
// shell, but a manager may split them).
func Check(spec string) error {
	switch {
	case spec == "":
		return errors.New("must not be empty")
	case len(spec) > MaxLen:
		return errors.New("must be at most 512 bytes")
	case spec[0] == '-':
		return errors.New("must not start with '-' (a package manager would read it as an option)")
	case strings.IndexFunc(spec, func(r rune) bool { return r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) }) >= 0:
		return errors.New("must not hold spaces or control characters")
	}
	return nil
}
