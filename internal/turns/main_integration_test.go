//go:build integration

package turns_test

import (
	"testing"

	"github.com/managed-agents/managed-agents/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
