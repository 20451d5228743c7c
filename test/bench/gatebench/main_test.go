// Package gatebench measures what the admission gate costs Longhorn's
// replica scheduling writes, made by Longhorn v1.12.0's own code (the
// replica scheduler's ScheduleReplica and the datastore's UpdateReplica of
// several longhorn-manager pods, each with its own datastore), through the
// gate (diskschedule-gate registered, every write asks the
// disk's DiskSchedule first) and the same writes with the gate not
// registered (Longhorn as it is today), in one run, on two sandboxes of the
// same topology running side by side. It prints p50/p99 latency and
// writes/s for 1 disk and for 64 disks, the ratios gate ÷ no gate, and where
// the gate's time goes.
//
// The sandboxes start only when -bench is given, so `go test ./...` runs
// only the unit tests of the benchmark's arithmetic and tables, at once. Figures and the command are recorded
// in docs/benchmarks.md.
package gatebench

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var (
	writerCount  = flag.Int("gatebench.writers", 8, "Concurrent writers, each placing one replica at a time, as Longhorn's volume-controller workers do.")
	logDir       = flag.String("gatebench.logs", "", "Keep the sandboxes' etcd, kube-apiserver and kube-scheduler logs under this directory (default: discard them).")
	phaseTimeout = flag.Duration("gatebench.timeout", 3*time.Minute, "How long one measured phase, or the wait for the ledgers to settle after it, may take.")
)

// TestMain discards the in-process controllers' logs when benchmarks run,
// to keep the figures readable; without -bench it only runs the (no) tests.
func TestMain(m *testing.M) {
	flag.Parse()
	testenv.QuietBenchmarks()
	os.Exit(m.Run())
}
