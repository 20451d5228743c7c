// Package scalebench measures the manager at a large cluster's size: by
// default 1000 Longhorn nodes with 4 disks each and 10,000 volumes of 3
// replicas each, persisted in a real API server exactly as Longhorn v1.12
// writes them (the test/framework/testenv fixtures, with every disk's status as
// Longhorn's node controller fills it). It reports, in one run:
//
//   - the manager's cold start: from its start until every ledger
//     (DiskSchedule) equals what is persisted and has nothing pending;
//   - the process's memory at that point (Go heap and stacks in use after a
//     GC, and VmRSS), as a difference from before the manager started;
//   - the mirror's full resync: a new manager started over ledgers already
//     in place, until its mirror has reconciled every ledger and its queue
//     is empty;
//   - the extender's /filter p50/p99 over HTTP for pods with one and four
//     Longhorn claims, beside a baseline handler that passes every node;
//   - the admission gate's latency for replica writes onto disks already
//     holding 0, 100 and 1000 replicas, and the API server's own latency
//     for the two ledger writes each costs, on copies of those ledgers no
//     manager watches.
//
// It holds only benchmarks; the test control plane starts only when -bench
// is given, so `go test ./...` passes at once. Sizes are flags. Figures and
// the command are in docs/benchmarks.md.
package scalebench

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var (
	nodeCount    = flag.Int("scalebench.nodes", 1000, "Longhorn nodes.")
	diskCount    = flag.Int("scalebench.disks", 4, "Disks per Longhorn node.")
	volumeCount  = flag.Int("scalebench.volumes", 10000, "Volumes, each with -scalebench.replicas replicas persisted on distinct nodes.")
	replicaCount = flag.Int("scalebench.replicas", 3, "Replicas per volume.")
	creators     = flag.Int("scalebench.creators", 64, "Concurrent clients creating the objects (setup, not measured).")
	filterCalls  = flag.Int("scalebench.filter-calls", 200, "Calls to /filter per pod shape and handler.")
	gateNodes    = flag.Int("scalebench.gate-nodes", 1, "Nodes kept for the gate's measurement (no volume's replicas placed there): on each, disk 0 holds no replica, disk 1 100 and disk 2 1000.")
	gateWrites   = flag.Int("scalebench.gate-writes", 20, "Replica writes through the gate per measured disk (a disk holding 1000 replicas ends with 1000 + this many entries, under the ledger's bound, dsv1.MaxReplicaEntries).")
	settleLimit  = flag.Duration("scalebench.timeout", 25*time.Minute, "How long the manager may take to settle, or the mirror to finish its pass.")
	verbose      = flag.Bool("scalebench.verbose", false, "Every 10 s of the cold start, also list the ledgers that differ from what is persisted (testenv.Unsettled over the manager's cache: a copy of every Replica, which costs the measured process CPU).")
	cpuProfile   = flag.String("scalebench.cpuprofile", "", "Write a CPU profile of the manager's cold start (from its start until the ledgers settle) to this file.")
)

var env *testenv.Env

// TestMain starts the test control plane only when -bench is given.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunBenchmarks(m, func(e *testenv.Env) { env = e }))
}
