package pgtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// MainVerifyNoLeaks is Main for a package that starts goroutines: after the tests and the
// server have stopped, any goroutine still running (goleak) fails the package. opts name the
// goroutines a package cannot stop, each with the reason at the call site.
//
//	func TestMain(m *testing.M) { pgtest.MainVerifyNoLeaks(m) }
func MainVerifyNoLeaks(m *testing.M, opts ...goleak.Option) {
	code := Run(m)
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
