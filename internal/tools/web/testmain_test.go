package web

import (
	"testing"

	"go.uber.org/goleak"
)

// Fetchers keep idle connections and tests run servers: every test closes both.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
