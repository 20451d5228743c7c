package node_test

import (
	"os"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// newNamespace creates a namespace named after the test, so each test owns its objects.
func newNamespace(t *testing.T) string { return env.NewNamespace(t) }

// startManager starts the project's manager for namespace and stops it when
// the test ends.
func startManager(t *testing.T, namespace string) {
	t.Helper()
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: namespace, GateGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping the manager: %v", err)
		}
	})
}

// waitTimeout is how long a test waits for the manager's controllers.
const waitTimeout = 20 * time.Second
