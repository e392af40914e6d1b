//go:build integration

package durable_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/managed-agents/managed-agents/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.MainVerifyNoLeaks(m,
		// The SDK's in-memory test environment (workflow_test.go) parks an activity's retry
		// goroutine on a timer of the environment, which ends with the test without waking it;
		// the SDK offers no way to stop it.
		goleak.IgnoreTopFunction("go.temporal.io/sdk/internal.(*testWorkflowEnvironmentImpl).executeActivityWithRetryForTest"),
	)
}
