package stall_test

import (
	"testing"

	"github.com/longhorn/diskschedule/internal/testenv/sandboxtest"
)

// TestMain silences the process-wide loggers (sandboxtest.Main).
func TestMain(m *testing.M) { sandboxtest.Main(m) }
