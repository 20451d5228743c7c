package diskschedule_test

import (
	"os"
	"testing"

	"github.com/longhorn/diskschedule/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// newNamespace creates a namespace named after the test, so each test owns its objects.
func newNamespace(t *testing.T) string { return env.NewNamespace(t) }
