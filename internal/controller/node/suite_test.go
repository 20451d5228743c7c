package node_test

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/manager/managertest"
	"github.com/longhorn/diskschedule/internal/testenv"
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

// eventually polls check until it reports done, and fails the test with
// what check last said otherwise.
func eventually(t *testing.T, ctx context.Context, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		done, state, err := check(ctx)
		if err == nil || ctx.Err() == nil {
			last = state
		}
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v; last seen: %s", what, err, last)
	}
}
