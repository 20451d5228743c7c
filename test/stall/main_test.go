package stall_test

import (
	"testing"

	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
)

// TestMain silences the process-wide loggers (sandboxtest.Main).
func TestMain(m *testing.M) { sandboxtest.Main(m) }
