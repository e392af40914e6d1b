package netguard

import (
	"testing"

	"go.uber.org/goleak"
)

// Tests dial real sockets and run HTTP servers: every test closes what it opens.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
