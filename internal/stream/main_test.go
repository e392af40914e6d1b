//go:build integration

package stream

import (
	"testing"

	"github.com/managed-agents/managed-agents/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainVerifyNoLeaks(m) }
