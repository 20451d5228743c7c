package gate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// bigDiskReplicas is how many 1Gi replicas TestTwoThousandReplicasOnOneDisk
// places on its one disk.
const bigDiskReplicas = 2000

// TestTwoThousandReplicasOnOneDisk: a disk that Longhorn fills with 2,000
// replicas of 1Gi works through the gate and through the mirror: every
// replica is created on the disk (spec.diskID set, as Longhorn writes a
// replica it placed) by 32 writers at once. Through the gate each creation
// asks the one ledger first (the gate's requests to one disk go together
// in one ledger write while another is in flight); with the gate off
// (Longhorn as it is today, or the add-on installed on a running
// Longhorn) the mirror adopts every replica. Either way the ledger then
// equals what is persisted; then half are deleted and the mirror releases
// them. The two cases run side by side, each in a sandbox of its own, once
// the package's other tests are done.
func TestTwoThousandReplicasOnOneDisk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		withGate bool
	}{{"through the gate", true}, {"through the mirror", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			twoThousandReplicasOnOneDisk(t, tc.withGate)
		})
	}
}

func twoThousandReplicasOnOneDisk(t *testing.T, withGate bool) {
	topo := &sandbox.Topology{Nodes: []sandbox.Node{{Name: "node-1", Disks: []sandbox.Disk{{Name: "disk-1", Size: 4096 * gib}}}}}
	sb := startSandbox(t, topo, 1, withGate)
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	uuid := sandbox.DiskUUID("node-1", "disk-1")
	start := time.Now()
	var noLeader, undecided atomic.Int64
	inParallel(t, bigDiskReplicas, func(i int) error {
		vol := fmt.Sprintf("pvc-big-%04d", i)
		// A write the gate answers "no leader is deciding" or "no decision
		// in time" is retried, as Longhorn's worker retries it; every
		// other refusal fails.
		for {
			r := testenv.Replica(sandbox.Namespace, vol+"-r-1", testenv.ReplicaFixture{Volume: vol, Size: gib,
				NodeID: "node-1", DiskName: "disk-1", DiskID: uuid})
			// As Longhorn's datastore writes a replica it placed: the
			// disk's path on its node and its disk UUID label, by which
			// Longhorn's node controller counts it on the disk.
			r.Spec.DiskPath = simcluster.DiskPath("node-1", "disk-1")
			r.Labels[lhtypes.LonghornDiskUUIDKey] = uuid
			err := testenv.CreateLonghorn(ctx, c, r)
			if err == nil {
				return nil
			}
			switch {
			case ctx.Err() != nil:
				return fmt.Errorf("creating replica %s: %w", r.Name, err)
			case strings.Contains(err.Error(), "no leader is deciding"):
				noLeader.Add(1)
			case strings.Contains(err.Error(), "the ledger gave no decision in time"):
				undecided.Add(1)
			default:
				return fmt.Errorf("creating replica %s: %w", r.Name, err)
			}
		}
	})
	t.Logf("%d replicas created in %s; %d writes answered that no leader was deciding and %d that the ledger gave no decision in time, and retried",
		bigDiskReplicas, time.Since(start).Round(time.Millisecond), noLeader.Load(), undecided.Load())
	waitLedgerOf(ctx, t, c, uuid, bigDiskReplicas)
	t.Logf("the mirror adopted them %s after the first was created", time.Since(start).Round(time.Millisecond))
	logLonghornsCount(ctx, t, c)
	settle(t, c)

	// Longhorn deletes a replica, cleans its data up and then drops its
	// finalizer; the replica is gone only then. Half of them go at once.
	start = time.Now()
	inParallel(t, bigDiskReplicas/2, func(i int) error {
		r := &lhv1.Replica{}
		key := client.ObjectKey{Namespace: sandbox.Namespace, Name: fmt.Sprintf("pvc-big-%04d-r-1", 2*i)}
		if err := c.Get(ctx, key, r); err != nil {
			return err
		}
		if err := c.Delete(ctx, r); err != nil {
			return fmt.Errorf("deleting replica %s: %w", r.Name, err)
		}
		patch := client.MergeFrom(r.DeepCopy())
		r.Finalizers = nil
		if err := c.Patch(ctx, r, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("dropping the finalizer of replica %s: %w", r.Name, err)
		}
		return nil
	})
	waitLedgerOf(ctx, t, c, uuid, bigDiskReplicas/2)
	t.Logf("%d replicas deleted and released in %s", bigDiskReplicas/2, time.Since(start).Round(time.Millisecond))
	logLonghornsCount(ctx, t, c)
	settle(t, c)
}

// inParallel runs do(0) … do(n-1) on writers goroutines and fails t on
// the first error.
func inParallel(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	next := make(chan int)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// waitLedgerOf waits until the ledger uuid grants exactly n replicas of 1Gi.
func waitLedgerOf(ctx context.Context, t *testing.T, c client.Client, uuid string, n int) {
	t.Helper()
	testenv.WaitLedger(t, ctx, c, sandbox.Namespace, uuid, 10*time.Minute, fmt.Sprintf("exactly %d replicas of 1Gi granted", n), func(ds *dsv1.DiskSchedule) bool {
		return len(ds.Spec.Replicas) == n && ds.Status.StorageScheduled == int64(n)*gib && ds.Status.ObservedGeneration == ds.Generation
	}, testenv.Every(500*time.Millisecond))
}

// logLonghornsCount logs what Longhorn's node controller counts on node-1's
// disk-1 now.
func logLonghornsCount(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	n := &lhv1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: "node-1"}, n); err != nil {
		t.Logf("getting Longhorn Node node-1: %v", err)
		return
	}
	if d := n.Status.DiskStatus["disk-1"]; d != nil {
		t.Logf("Longhorn's node controller counts %d replicas, %s scheduled, on node-1's disk-1", len(d.ScheduledReplica), ledger.Bytes(d.StorageScheduled))
	}
}
