package node_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/node"
	"github.com/longhorn/diskschedule/internal/diskmonitor"
	"github.com/longhorn/diskschedule/internal/nodestatus"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const gi = int64(1) << 30

// TestDiskSchedulePerDisk checks that the node controller keeps one
// DiskSchedule per measured disk, owned by the Node and labelled with it, and
// deletes the ledger of a disk that leaves the Node or changes its UUID.
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
	ln := &longhornv1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: f.Name}, ln); err != nil {
		t.Fatal(err)
	}
	for name, d := range f.Disks {
		ds := waitDiskSchedule(t, ctx, ns, d.UUID)
		if ds.Spec.Name != name || ds.Spec.NodeID != f.Name {
			t.Errorf("DiskSchedule %s: spec.name %q, spec.nodeID %q; want %q, %q", d.UUID, ds.Spec.Name, ds.Spec.NodeID, name, f.Name)
		}
		if got := ds.Labels[node.LabelNode]; got != f.Name {
			t.Errorf("DiskSchedule %s: label %s=%q, want %q", d.UUID, node.LabelNode, got, f.Name)
		}
		owner := metav1.GetControllerOf(ds)
		if owner == nil || owner.Kind != "Node" || owner.APIVersion != longhornv1.GroupVersion.String() ||
			owner.Name != f.Name || owner.UID != ln.UID {
			t.Errorf("DiskSchedule %s: controller owner %+v, want Node %s (UID %s)", d.UUID, owner, f.Name, ln.UID)
		}
	}

	// The disk leaves the Node's spec, and the disk monitor stops reporting it.
	updateNode(t, ctx, ns, f.Name, func(n *longhornv1.Node) { delete(n.Spec.Disks, "disk-b") })
	delete(f.Disks, "disk-b")
	if err := f.Measure(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, ns+"-uuid-b")
	eventually(t, ctx, "disk-b leaves the Node status", func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, f.Name)
		if err != nil {
			return false, "", err
		}
		_, found := n.Status.DiskStatus["disk-b"]
		return !found, fmt.Sprintf("diskStatus keys %v", keys(n.Status.DiskStatus)), nil
	})
	if ds := waitDiskSchedule(t, ctx, ns, ns+"-uuid-a"); ds.DeletionTimestamp != nil {
		t.Errorf("the DiskSchedule of disk-a, still on the node, is being deleted")
	}

	// The disk behind disk-a is replaced: a new UUID, a new ledger.
	f.Disks["disk-a"] = testenv.Disk{UUID: ns + "-uuid-a2", Size: 100 * gi}
	if err := f.Measure(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, ns+"-uuid-a")
	ds := waitDiskSchedule(t, ctx, ns, ns+"-uuid-a2")
	if ds.Spec.Name != "disk-a" || ds.Spec.NodeID != f.Name || ds.Labels[node.LabelNode] != f.Name {
		t.Errorf("DiskSchedule of the new UUID: spec.name %q, spec.nodeID %q, labels %v", ds.Spec.Name, ds.Spec.NodeID, ds.Labels)
	}
	if owner := metav1.GetControllerOf(ds); owner == nil || owner.UID != ln.UID {
		t.Errorf("DiskSchedule of the new UUID: controller owner %+v, want Node UID %s", owner, ln.UID)
	}
}

// TestZoneAndRegion checks that the Kubernetes node's topology labels land
// in the Longhorn Node's status and follow label changes.
func TestZoneAndRegion(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	f := testenv.NodeFixture{Name: ns + "-node", Zone: "zone-1", Disks: map[string]testenv.Disk{
		"disk-0": {UUID: ns + "-uuid-0", Size: 10 * gi},
	}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitNodeStatus(t, ctx, ns, f.Name, "status.zone is zone-1", func(n *longhornv1.Node) (bool, string) {
		return n.Status.Zone == "zone-1" && n.Status.Region == "", fmt.Sprintf("zone %q, region %q", n.Status.Zone, n.Status.Region)
	})
	updateKubeNode(t, ctx, f.Name, func(n *corev1.Node) {
		n.Labels[corev1.LabelTopologyZone] = "zone-2"
		n.Labels[corev1.LabelTopologyRegion] = "region-1"
	})
	waitNodeStatus(t, ctx, ns, f.Name, "status.zone is zone-2 in region-1", func(n *longhornv1.Node) (bool, string) {
		return n.Status.Zone == "zone-2" && n.Status.Region == "region-1", fmt.Sprintf("zone %q, region %q", n.Status.Zone, n.Status.Region)
	})
}

// TestCordonedNode checks that a cordoned Kubernetes node makes the Longhorn
// Node unschedulable (and its ledgers refuse new requests) while
// disable-scheduling-on-cordoned-node is true, and not once it is false.
func TestCordonedNode(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{
		"disk-0": {UUID: ns + "-uuid-0", Size: 10 * gi},
	}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	schedulable := func(status metav1.ConditionStatus, reason string) func(n *longhornv1.Node) (bool, string) {
		return func(n *longhornv1.Node) (bool, string) {
			c := meta.FindStatusCondition(n.Status.Conditions, longhornv1.NodeConditionSchedulable)
			if c == nil {
				return false, "no Schedulable condition"
			}
			return c.Status == status && c.Reason == reason, fmt.Sprintf("Schedulable=%s reason %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	waitNodeStatus(t, ctx, ns, f.Name, "the node is Schedulable", schedulable(metav1.ConditionTrue, longhornv1.NodeReasonSchedulable))
	waitLedgerReady(t, ctx, ns, ns+"-uuid-0", metav1.ConditionTrue, longhornv1.DiskScheduleReasonSchedulable)

	updateKubeNode(t, ctx, f.Name, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	waitNodeStatus(t, ctx, ns, f.Name, "the cordoned node is not Schedulable",
		schedulable(metav1.ConditionFalse, longhornv1.NodeReasonKubernetesNodeCordoned))
	waitLedgerReady(t, ctx, ns, ns+"-uuid-0", metav1.ConditionFalse, longhornv1.DiskScheduleReasonNodeUnschedulable)

	setSetting(t, ctx, ns, longhornv1.SettingDisableSchedulingOnCordonedNode, "false")
	waitNodeStatus(t, ctx, ns, f.Name, "the cordoned node is Schedulable once the setting is false",
		schedulable(metav1.ConditionTrue, longhornv1.NodeReasonSchedulable))
	waitLedgerReady(t, ctx, ns, ns+"-uuid-0", metav1.ConditionTrue, longhornv1.DiskScheduleReasonSchedulable)
}

// TestLedgerMirror checks that each disk's status mirrors its ledger:
// storageScheduled and the granted replicas, not the rejected ones.
func TestLedgerMirror(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	uuid := ns + "-uuid-0"
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitLedgerReady(t, ctx, ns, uuid, metav1.ConditionTrue, longhornv1.DiskScheduleReasonSchedulable)
	createReplica(t, ctx, ns, f.Name, uuid, "r-0", 30*gi)
	createReplica(t, ctx, ns, f.Name, uuid, "r-1", 80*gi)
	request(t, ctx, ns, uuid, map[string]int64{"r-0": 30 * gi, "r-1": 80 * gi})
	ds := waitDecided(t, ctx, ns, uuid)
	if st := ds.Status.Replicas["r-0"]; st.State != longhornv1.RequestStateScheduled || st.ScheduledSize != 30*gi {
		t.Fatalf("r-0: %+v, want scheduled 30Gi", st)
	}
	if st := ds.Status.Replicas["r-1"]; st.State != longhornv1.RequestStateRejected || st.ScheduledSize != 0 {
		t.Fatalf("r-1: %+v, want rejected with 0", st)
	}

	waitNodeStatus(t, ctx, ns, f.Name, "disk-0 mirrors 30Gi for r-0", func(n *longhornv1.Node) (bool, string) {
		d := n.Status.DiskStatus["disk-0"]
		if d == nil {
			return false, "no disk-0 status"
		}
		want := map[string]int64{"r-0": 30 * gi}
		return d.StorageScheduled == 30*gi && maps.Equal(d.ScheduledReplica, want),
			fmt.Sprintf("storageScheduled %d, scheduledReplica %v", d.StorageScheduled, d.ScheduledReplica)
	})

	request(t, ctx, ns, uuid, map[string]int64{"r-1": 80 * gi})
	waitNodeStatus(t, ctx, ns, f.Name, "disk-0 mirrors nothing once r-0 is released", func(n *longhornv1.Node) (bool, string) {
		d := n.Status.DiskStatus["disk-0"]
		if d == nil {
			return false, "no disk-0 status"
		}
		return d.StorageScheduled == 0 && len(d.ScheduledReplica) == 0,
			fmt.Sprintf("storageScheduled %d, scheduledReplica %v", d.StorageScheduled, d.ScheduledReplica)
	})
}

// TestDiskStillAllocatedIsKept checks that a disk removed from the Node
// keeps its ledger, with a Warning Event, while the ledger grants space, and
// that the ledger goes once its last replica is gone.
func TestDiskStillAllocatedIsKept(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	uuid := ns + "-uuid-0"
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	waitLedgerReady(t, ctx, ns, uuid, metav1.ConditionTrue, longhornv1.DiskScheduleReasonSchedulable)
	replica := createReplica(t, ctx, ns, f.Name, uuid, "r-0", 10*gi)
	request(t, ctx, ns, uuid, map[string]int64{"r-0": 10 * gi})
	if ds := waitDecided(t, ctx, ns, uuid); ds.Status.StorageScheduled != 10*gi {
		t.Fatalf("storageScheduled %d after granting r-0, want 10Gi", ds.Status.StorageScheduled)
	}

	updateNode(t, ctx, ns, f.Name, func(n *longhornv1.Node) { delete(n.Spec.Disks, "disk-0") })
	delete(f.Disks, "disk-0")
	if err := f.Measure(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "a Warning DiskStillAllocated Event is recorded", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			seen = append(seen, ev.Type+"/"+ev.Reason)
			if ev.Reason == node.ReasonDiskStillAllocated && ev.Type == corev1.EventTypeWarning &&
				ev.Regarding.Kind == "Node" && ev.Regarding.Name == f.Name {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("events %v", seen), nil
	})
	// The reconcile that recorded the Event kept the ledger.
	ds := &longhornv1.DiskSchedule{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
		t.Fatalf("the ledger of the removed disk that still grants 10Gi: %v", err)
	}
	if ds.DeletionTimestamp != nil || ds.Status.StorageScheduled != 10*gi || ds.Status.Replicas["r-0"].ScheduledSize != 10*gi {
		t.Fatalf("the ledger of the removed disk: deleting %v, storageScheduled %d, r-0 %+v; want kept with 10Gi",
			ds.DeletionTimestamp != nil, ds.Status.StorageScheduled, ds.Status.Replicas["r-0"])
	}

	// Its last replica gone, the ledger grants nothing and goes too.
	if err := env.Client.Delete(ctx, replica); err != nil {
		t.Fatal(err)
	}
	waitDiskScheduleGone(t, ctx, ns, uuid)
}

// TestDiskPressure checks the disk Schedulable condition against the
// actual-space rule: storageAvailable must stay above
// storageMaximum × storage-minimal-available-percentage / 100 (25%).
func TestDiskPressure(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManager(t, ns)
	uuid := ns + "-uuid-0"
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: uuid, Size: 100 * gi}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what               string
		maximum, available int64
		status             metav1.ConditionStatus
		reason             string
	}{
		// Each case flips the condition, so a condition the node controller
		// derived from the previous measurement never passes for this one.
		{"all free", 100 * gi, 100 * gi, metav1.ConditionTrue, longhornv1.DiskReasonSchedulable},
		{"exactly 25% free", 100 * gi, 25 * gi, metav1.ConditionFalse, longhornv1.DiskReasonDiskPressure},
		{"one byte above 25%", 100 * gi, 25*gi + 1, metav1.ConditionTrue, longhornv1.DiskReasonSchedulable},
		// 25% of 100Gi+99 bytes is 25Gi+24 bytes (truncated): a disk with
		// exactly that much free is under pressure, one byte more is not.
		{"25% of an odd size", 100*gi + 99, 25*gi + 24, metav1.ConditionFalse, longhornv1.DiskReasonDiskPressure},
		{"one byte above 25% of an odd size", 100*gi + 99, 25*gi + 25, metav1.ConditionTrue, longhornv1.DiskReasonSchedulable},
		{"less than 25% free", 100 * gi, 10 * gi, metav1.ConditionFalse, longhornv1.DiskReasonDiskPressure},
	} {
		measure(t, ctx, ns, f.Name, diskmonitor.Static{"disk-0": {
			UUID: uuid, Type: longhornv1.DiskTypeFilesystem, StorageMaximum: tc.maximum, StorageAvailable: tc.available,
		}})
		waitNodeStatus(t, ctx, ns, f.Name, fmt.Sprintf("%s: disk-0 Schedulable=%s (%s)", tc.what, tc.status, tc.reason),
			func(n *longhornv1.Node) (bool, string) {
				d := n.Status.DiskStatus["disk-0"]
				if d == nil {
					return false, "no disk-0 status"
				}
				c := meta.FindStatusCondition(d.Conditions, longhornv1.DiskConditionSchedulable)
				if c == nil {
					return false, "no Schedulable condition"
				}
				state := fmt.Sprintf("maximum %d, available %d, Schedulable=%s reason %s: %s",
					d.StorageMaximum, d.StorageAvailable, c.Status, c.Reason, c.Message)
				return d.StorageMaximum == tc.maximum && d.StorageAvailable == tc.available &&
					c.Status == tc.status && c.Reason == tc.reason, state
			})
	}
}

func getNode(ctx context.Context, ns, name string) (*longhornv1.Node, error) {
	n := &longhornv1.Node{}
	return n, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, n)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// updateNode changes the Longhorn Node's spec, retrying on conflict.
func updateNode(t *testing.T, ctx context.Context, ns, name string, mutate func(*longhornv1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := getNode(ctx, ns, name)
		if err != nil {
			return err
		}
		mutate(n)
		return env.Client.Update(ctx, n)
	})
	if err != nil {
		t.Fatalf("updating node %s: %v", name, err)
	}
}

// updateKubeNode changes the Kubernetes Node, retrying on conflict.
func updateKubeNode(t *testing.T, ctx context.Context, name string, mutate func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		mutate(n)
		return env.Client.Update(ctx, n)
	})
	if err != nil {
		t.Fatalf("updating Kubernetes node %s: %v", name, err)
	}
}

// measure applies the disk monitor's fields as measured by src.
func measure(t *testing.T, ctx context.Context, ns, name string, src diskmonitor.Static) {
	t.Helper()
	n, err := getNode(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	status := diskmonitor.Measure(n, src, metav1.Now())
	if err := nodestatus.Apply(ctx, env.Client, ns, name, nodestatus.DiskMonitorManager, status); err != nil {
		t.Fatal(err)
	}
}

// setSetting sets a Setting the manager created and waits until the manager
// has seen the new value.
func setSetting(t *testing.T, ctx context.Context, ns, name, value string) {
	t.Helper()
	key := client.ObjectKey{Namespace: ns, Name: name}
	var generation int64
	eventually(t, ctx, "setting "+name+" is "+value, func(ctx context.Context) (bool, string, error) {
		s := &longhornv1.Setting{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		if s.Value == value {
			generation = s.Generation
			return true, "", nil
		}
		s.Value = value
		if err := env.Client.Update(ctx, s); err != nil {
			if apierrors.IsConflict(err) {
				return false, err.Error(), nil
			}
			return false, "", err
		}
		generation = s.Generation
		return true, "", nil
	})
	// The setting controller reads the manager's cache: once it has judged
	// this generation, every controller of the manager sees the value.
	eventually(t, ctx, "setting "+name+" is applied", func(ctx context.Context) (bool, string, error) {
		s := &longhornv1.Setting{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, longhornv1.SettingConditionValid)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation,
			fmt.Sprintf("conditions %+v", s.Status.Conditions), nil
	})
}

// waitNodeStatus waits until check accepts the Longhorn Node.
func waitNodeStatus(t *testing.T, ctx context.Context, ns, name, what string, check func(*longhornv1.Node) (bool, string)) {
	t.Helper()
	eventually(t, ctx, what, func(ctx context.Context) (bool, string, error) {
		n, err := getNode(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		done, state := check(n)
		return done, state, nil
	})
}

// waitDiskSchedule waits until the named DiskSchedule exists and returns it.
func waitDiskSchedule(t *testing.T, ctx context.Context, ns, uuid string) *longhornv1.DiskSchedule {
	t.Helper()
	ds := &longhornv1.DiskSchedule{}
	eventually(t, ctx, "DiskSchedule "+uuid+" exists", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds)
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return err == nil, "", err
	})
	return ds
}

// waitDiskScheduleGone waits until the named DiskSchedule no longer exists.
func waitDiskScheduleGone(t *testing.T, ctx context.Context, ns, uuid string) {
	t.Helper()
	eventually(t, ctx, "DiskSchedule "+uuid+" is deleted", func(ctx context.Context) (bool, string, error) {
		ds := &longhornv1.DiskSchedule{}
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

// waitLedgerReady waits until the DiskSchedule's Ready condition has the
// given status and reason.
func waitLedgerReady(t *testing.T, ctx context.Context, ns, uuid string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("DiskSchedule %s is Ready=%s (%s)", uuid, status, reason), func(ctx context.Context) (bool, string, error) {
		ds := &longhornv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		c := meta.FindStatusCondition(ds.Status.Conditions, longhornv1.DiskScheduleConditionReady)
		if c == nil {
			return false, "no Ready condition", nil
		}
		return c.Status == status && c.Reason == reason, fmt.Sprintf("Ready=%s reason %s: %s", c.Status, c.Reason, c.Message), nil
	})
}

// createReplica creates a Replica placed on the disk, so that the ledger
// keeps its request and learns of its deletion.
func createReplica(t *testing.T, ctx context.Context, ns, nodeName, uuid, name string, size int64) *longhornv1.Replica {
	t.Helper()
	r := &longhornv1.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       longhornv1.ReplicaSpec{VolumeName: "vol-" + name, VolumeSize: size, NodeID: nodeName, DiskID: uuid},
	}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// request sets the DiskSchedule's replica requests, retrying on conflict.
func request(t *testing.T, ctx context.Context, ns, uuid string, replicas map[string]int64) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := &longhornv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
			return err
		}
		ds.Spec.Replicas = map[string]longhornv1.RequestedBytes{}
		for name, size := range replicas {
			ds.Spec.Replicas[name] = longhornv1.RequestedBytes(size)
		}
		return env.Client.Update(ctx, ds)
	})
	if err != nil {
		t.Fatalf("writing requests to DiskSchedule %s: %v", uuid, err)
	}
}

// waitDecided waits until the DiskSchedule has decided its current spec.
func waitDecided(t *testing.T, ctx context.Context, ns, uuid string) *longhornv1.DiskSchedule {
	t.Helper()
	ds := &longhornv1.DiskSchedule{}
	eventually(t, ctx, "DiskSchedule "+uuid+" decides its requests", func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
			return false, "", err
		}
		if ds.Status.ObservedGeneration < ds.Generation {
			return false, fmt.Sprintf("observedGeneration %d of %d", ds.Status.ObservedGeneration, ds.Generation), nil
		}
		for name, size := range ds.Spec.Replicas {
			if st, ok := ds.Status.Replicas[name]; !ok || st.RequestedSize != int64(size) {
				return false, "replica " + name + " undecided", nil
			}
		}
		return true, "", nil
	})
	return ds
}
