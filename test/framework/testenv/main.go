package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Run is the body of an envtest suite's TestMain: it starts the test control
// plane, hands it to set, runs the tests and stops it, returning the exit code.
func Run(m *testing.M, set func(*Env)) int {
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set(env)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// RunBenchmarks is Run for packages that hold only benchmarks: the control
// plane starts only when -bench is given, so `go test ./...` passes at once.
// Controller logs are discarded, to keep the figures readable.
func RunBenchmarks(m *testing.M, set func(*Env)) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run()
	}
	ctrllog.SetLogger(logr.Discard())
	return Run(m, set)
}
