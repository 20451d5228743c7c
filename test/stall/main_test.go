package stall_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain discards the in-process controllers' controller-runtime logs:
// the sandbox writes its components' logs to files, and the test prints
// its figures.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
