package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/node"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestMismatchedLedgerIsReplaced creates, before Longhorn reports the
// disk, a DiskSchedule named by the disk's UUID that says another node
// (and one that says another disk name of the right node): each is
// replaced by the disk's own ledger, with a Warning Event, its requests
// carried over, and the replica Longhorn persisted on the disk is granted
// there, so the disk is not blocked and its space is still counted.
func TestMismatchedLedgerIsReplaced(t *testing.T) {
	for _, tc := range []struct{ name, nodeID, diskName string }{
		{"wrong node", "someone-elses-node", "disk-0"},
		{"wrong disk name", "", "disk-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := newNamespace(t)
			uuid := ns + "-uuid-0"
			f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
			nodeID := tc.nodeID
			if nodeID == "" {
				nodeID = f.Name
			}
			wrong := &dsv1.DiskSchedule{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uuid},
				Spec: dsv1.DiskScheduleSpec{Name: tc.diskName, NodeID: nodeID,
					Replicas: map[string]dsv1.RequestedBytes{"r-0": dsv1.RequestedBytes(10 * gi)}},
			}
			if err := env.Client.Create(ctx, wrong); err != nil {
				t.Fatal(err)
			}
			createReplica(t, ctx, ns, f.Name, uuid)
			if err := f.CreateNode(ctx, env.Client, ns); err != nil {
				t.Fatal(err)
			}
			startManager(t, ns)

			ds := testenv.WaitLedger(t, ctx, env.Client, ns, uuid, waitTimeout, "is the disk's own ledger and grants r-0", func(ds *dsv1.DiskSchedule) bool {
				st, ok := ds.Status.Replicas["r-0"]
				return ds.Spec.NodeID == f.Name && ds.Spec.Name == "disk-0" && ok && st.State == dsv1.RequestStateScheduled && st.ScheduledSize == 10*gi
			})
			if ds.UID == wrong.UID {
				t.Errorf("the DiskSchedule was not replaced: UID %s", ds.UID)
			}
			if owner := metav1.GetControllerOf(ds); owner == nil || owner.Kind != "Node" || owner.Name != f.Name {
				t.Errorf("the replacement's controller owner is %+v, want Node %s", owner, f.Name)
			}
			if ds.Status.StorageScheduled != 10*gi {
				t.Errorf("the replacement's storageScheduled is %d, want %d", ds.Status.StorageScheduled, 10*gi)
			}
			waitWarning(t, ctx, ns, node.ReasonDiskScheduleMismatch, uuid)
		})
	}
}

// TestLedgerOfADiskReportedTwiceIsLeftAlone checks that a DiskSchedule
// whose node does report its UUID under its disk name is not replaced when
// another node reports the same UUID.
func TestLedgerOfADiskReportedTwiceIsLeftAlone(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	uuid := ns + "-uuid-0"
	first := testenv.NodeFixture{Name: ns + "-node-a", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
	if err := first.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)
	ds := waitDiskSchedule(t, ctx, ns, uuid)
	second := testenv.NodeFixture{Name: ns + "-node-b", Disks: map[string]testenv.Disk{"disk-1": {UUID: uuid, Size: 100 * gi}}}
	if err := second.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	testenv.Consistently(t, ctx, 2*time.Second, "the ledger of node-a's disk stays", func(context.Context) (bool, string, error) {
		// The test's context, not the window's: a read near the window's
		// end must not fail for the window's deadline.
		got := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ds), got); err != nil {
			return false, "", err
		}
		return got.UID == ds.UID && got.DeletionTimestamp == nil, fmt.Sprintf("UID %s, nodeID %s", got.UID, got.Spec.NodeID), nil
	})
}
