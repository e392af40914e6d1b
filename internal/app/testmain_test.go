//go:build !integration

package app

import (
	"testing"

	"go.uber.org/goleak"
)

// The unit tests' TestMain; with the integration tag, main_integration_test.go's also checks
// for leaks.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
