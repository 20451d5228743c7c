package diskschedule_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/longhorn/diskschedule/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// newNamespace creates a namespace named after the test, so each test owns its objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	if err := env.CreateNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}
