package node_test

import (
	"context"
	"fmt"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/node"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// TestDiskSchedulePerDisk checks that the node controller keeps one
// DiskSchedule per disk UUID of a Longhorn Node's status, labelled with and
// owned by the Node, deletes the ledger of a disk that leaves the Node or
// changes its UUID, and never writes the Node.
func TestDiskSchedulePerDisk(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{
		"disk-a": {UUID: ns + "-uuid-a", Size: 100 * gi},
		"disk-b": {UUID: ns + "-uuid-b", Size: 50 * gi},
	}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	ln := getNode(t, ctx, ns, f.Name)
	for name, d := range f.Disks {
		ds := waitDiskSchedule(t, ctx, ns, d.UUID)
		if ds.Spec.Name != name || ds.Spec.NodeID != f.Name {
			t.Errorf("DiskSchedule %s: spec.name %q, spec.nodeID %q; want %q, %q", d.UUID, ds.Spec.Name, ds.Spec.NodeID, name, f.Name)
		}
		if got := ds.Labels[node.LabelNode]; got != f.Name {
			t.Errorf("DiskSchedule %s: label %s=%q, want %q", d.UUID, node.LabelNode, got, f.Name)
		}
		owner := metav1.GetControllerOf(ds)
		if owner == nil || owner.Kind != "Node" || owner.APIVersion != lhv1.SchemeGroupVersion.String() ||
			owner.Name != f.Name || owner.UID != ln.UID || owner.BlockOwnerDeletion != nil {
			t.Errorf("DiskSchedule %s: controller owner %+v, want Node %s (UID %s) without blockOwnerDeletion", d.UUID, owner, f.Name, ln.UID)
		}
	}

	// Longhorn drops the disk from the Node.
	delete(f.Disks, "disk-b")
	if err := f.Apply(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, ns+"-uuid-b")
	if ds := waitDiskSchedule(t, ctx, ns, ns+"-uuid-a"); ds.DeletionTimestamp != nil {
		t.Errorf("the DiskSchedule of disk-a, still on the node, is being deleted")
	}

	// The disk behind disk-a is replaced: a new UUID, a new ledger.
	f.Disks["disk-a"] = testenv.Disk{UUID: ns + "-uuid-a2", Size: 100 * gi}
	if err := f.Apply(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, ns+"-uuid-a")
	ds := waitDiskSchedule(t, ctx, ns, ns+"-uuid-a2")
	if ds.Spec.Name != "disk-a" || ds.Spec.NodeID != f.Name || ds.Labels[node.LabelNode] != f.Name {
		t.Errorf("DiskSchedule of the new UUID: spec.name %q, spec.nodeID %q, labels %v", ds.Spec.Name, ds.Spec.NodeID, ds.Labels)
	}

	// The manager never wrote the Longhorn Node: its last write is the test's.
	before := getNode(t, ctx, ns, f.Name)
	waitDiskSchedule(t, ctx, ns, ns+"-uuid-a2")
	if after := getNode(t, ctx, ns, f.Name); after.ResourceVersion != before.ResourceVersion || len(after.Finalizers) != 0 {
		t.Errorf("the Longhorn Node changed: resourceVersion %s → %s, finalizers %v", before.ResourceVersion, after.ResourceVersion, after.Finalizers)
	}
}

// TestNodeDeleted checks that the ledgers of a deleted Longhorn Node that
// grant nothing are deleted.
func TestNodeDeleted(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: ns + "-uuid-0", Size: 10 * gi}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitDiskSchedule(t, ctx, ns, ns+"-uuid-0")
	if err := env.Client.Delete(ctx, f.LonghornNode(ns)); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, ns+"-uuid-0")
}

// TestDiskStillAllocatedIsKept checks that the ledger of a disk removed from
// its Node is kept, with a Warning Event, while it grants space to a replica
// Longhorn persisted there, and goes once the replica is gone.
func TestDiskStillAllocatedIsKept(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	uuid := ns + "-uuid-0"
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	replica := createReplica(t, ctx, ns, f.Name, uuid)
	testenv.Eventually(t, ctx, waitTimeout, "the mirror adopts r-0", func(ctx context.Context) (bool, string, error) {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		return ds.Status.StorageScheduled == 10*gi, fmt.Sprintf("storageScheduled %d", ds.Status.StorageScheduled), nil
	})

	delete(f.Disks, "disk-0")
	if err := f.Apply(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitWarning(t, ctx, ns, node.ReasonDiskStillAllocated, uuid)
	ds := &dsv1.DiskSchedule{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
		t.Fatalf("the ledger of the removed disk that still grants 10Gi: %v", err)
	}
	if ds.DeletionTimestamp != nil || ds.Status.StorageScheduled != 10*gi {
		t.Fatalf("the ledger of the removed disk: deleting %v, storageScheduled %d; want kept with 10Gi",
			ds.DeletionTimestamp != nil, ds.Status.StorageScheduled)
	}

	// Longhorn deletes the replica: the mirror releases it and the ledger goes.
	if err := env.Client.Delete(ctx, replica); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, uuid)
}

// createReplica creates the running Replica r-0 of 10Gi that Longhorn
// persisted on disk-0 (UUID uuid) of nodeName, without finalizers.
func createReplica(t *testing.T, ctx context.Context, ns, nodeName, uuid string) *lhv1.Replica {
	t.Helper()
	replica := testenv.Replica(ns, "r-0", testenv.ReplicaFixture{Volume: "vol-0", Size: 10 * gi, NodeID: nodeName, DiskName: "disk-0",
		DiskID: uuid, State: lhv1.InstanceStateRunning})
	replica.Finalizers = nil
	if err := testenv.CreateLonghorn(ctx, env.Client, replica); err != nil {
		t.Fatal(err)
	}
	return replica
}

// waitWarning waits until a Warning Event of reason is recorded on the
// DiskSchedule uuid.
func waitWarning(t *testing.T, ctx context.Context, ns, reason, uuid string) {
	t.Helper()
	testenv.Eventually(t, ctx, waitTimeout, "a Warning "+reason+" Event is recorded", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			seen = append(seen, ev.Type+"/"+ev.Reason)
			if ev.Reason == reason && ev.Type == corev1.EventTypeWarning &&
				ev.Regarding.Kind == "DiskSchedule" && ev.Regarding.Name == uuid {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("events %v", seen), nil
	})
}

func getNode(t *testing.T, ctx context.Context, ns, name string) *lhv1.Node {
	t.Helper()
	n := &lhv1.Node{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitDiskSchedule waits until the named DiskSchedule exists and returns it.
func waitDiskSchedule(t *testing.T, ctx context.Context, ns, uuid string) *dsv1.DiskSchedule {
	t.Helper()
	return testenv.WaitLedger(t, ctx, env.Client, ns, uuid, waitTimeout, "exists", func(*dsv1.DiskSchedule) bool { return true })
}

// waitDiskScheduleGone waits until the named DiskSchedule no longer exists.
func waitDiskScheduleGone(t *testing.T, ctx context.Context, ns, uuid string) {
	t.Helper()
	testenv.Eventually(t, ctx, waitTimeout, "DiskSchedule "+uuid+" is deleted", func(ctx context.Context) (bool, string, error) {
		ds := &dsv1.DiskSchedule{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("storageScheduled %d, spec.replicas %v", ds.Status.StorageScheduled, ds.Spec.Replicas), nil
	})
}
