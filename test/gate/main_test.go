// Package gate_test attacks the admission gate as Longhorn's volume
// controllers do, with Longhorn v1.12.0's own code
// (test/framework/testenv/replicawriter): the volume controllers of several
// longhorn-manager pods, each pod with its own datastore and replica
// scheduler, place replicas from their stale views at once, some of their
// writes are lost while the gate holds them, and managers stop mid-run. A watch of every
// Replica event checks that the bytes persisted on a disk never exceed its
// limit; after quiescence every ledger equals what is persisted. The same
// workload without the gate overfills the disks.
package gate_test

import (
	"testing"

	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
)

// TestMain silences the process-wide loggers (sandboxtest.Main).
func TestMain(m *testing.M) { sandboxtest.Main(m) }
