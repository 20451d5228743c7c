package diskschedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestDiskFactsFromLonghorn checks that each ledger takes its limit (rule 1)
// and its schedulability (rule 8) from Longhorn's Node as Longhorn writes
// it: the disk's storageMaximum and storageReserved, the
// storage-over-provisioning-percentage Setting, the node's Ready and
// Schedulable conditions, allowScheduling and evictionRequested of node and
// disk, and the disk's Ready condition.
func TestDiskFactsFromLonghorn(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	startManagers(t, ns, 1, nil)
	cases := []struct {
		name   string
		node   func(*testenv.NodeFixture)
		disk   func(*testenv.Disk)
		reason string
	}{
		{"schedulable", nil, nil, dsv1.DiskScheduleReasonSchedulable},
		{"node-not-ready", func(f *testenv.NodeFixture) { f.NotReady = true }, nil, dsv1.DiskScheduleReasonNodeNotReady},
		{"node-cordoned", func(f *testenv.NodeFixture) { f.Cordoned = true }, nil, dsv1.DiskScheduleReasonNodeUnschedulable},
		{"node-disabled", func(f *testenv.NodeFixture) { f.SchedulingDisabled = true }, nil, dsv1.DiskScheduleReasonNodeSchedulingDisabled},
		{"node-evicting", func(f *testenv.NodeFixture) { f.EvictionRequested = true }, nil, dsv1.DiskScheduleReasonNodeEvictionRequested},
		{"disk-disabled", nil, func(d *testenv.Disk) { d.SchedulingDisabled = true }, dsv1.DiskScheduleReasonDiskSchedulingDisabled},
		{"disk-evicting", nil, func(d *testenv.Disk) { d.EvictionRequested = true }, dsv1.DiskScheduleReasonDiskEvictionRequested},
		{"disk-not-ready", nil, func(d *testenv.Disk) { d.NotReady = true }, dsv1.DiskScheduleReasonDiskNotReady},
	}
	fixtures := map[string]testenv.NodeFixture{}
	for _, tc := range cases {
		d := testenv.Disk{UUID: ns + "-" + tc.name, Size: 100 * gi, Reserved: 10 * gi}
		if tc.disk != nil {
			tc.disk(&d)
		}
		f := testenv.NodeFixture{Name: ns + "-" + tc.name, Disks: map[string]testenv.Disk{"disk-0": d}}
		if tc.node != nil {
			tc.node(&f)
		}
		if err := f.CreateNode(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
		fixtures[tc.name] = f
	}
	for _, tc := range cases {
		ds := testenv.WaitLedger(t, ctx, env.Client, ns, ns+"-"+tc.name, ledgerTimeout, "Ready reason "+tc.reason+" and limit 90Gi", func(ds *dsv1.DiskSchedule) bool {
			c := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
			return c != nil && c.Reason == tc.reason && ds.Status.StorageLimit == 90*gi
		})
		c := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
		if want := tc.reason == dsv1.DiskScheduleReasonSchedulable; (c.Status == metav1.ConditionTrue) != want {
			t.Errorf("%s: Ready=%s, want %v", tc.name, c.Status, want)
		}
		if ds.Spec.NodeID != fixtures[tc.name].Name || ds.Spec.Name != "disk-0" {
			t.Errorf("%s: spec.nodeID %q, spec.name %q", tc.name, ds.Spec.NodeID, ds.Spec.Name)
		}
	}

	// A disk that is not schedulable rejects new requests with its reason.
	cordoned := ns + "-node-cordoned"
	ds := writeSpec(t, ctx, ns, cordoned, func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = map[string]dsv1.RequestedBytes{"r-new": dsv1.RequestedBytes(gi)}
	})
	st := ds.Status.Replicas["r-new"]
	if st.State != dsv1.RequestStateRejected || !strings.Contains(st.Message, dsv1.DiskScheduleReasonNodeUnschedulable) ||
		!strings.Contains(st.Message, lhv1.NodeConditionReasonKubernetesNodeCordoned) {
		t.Errorf("a request on a cordoned node's disk: %+v, want rejected naming %s and Longhorn's reason", st, dsv1.DiskScheduleReasonNodeUnschedulable)
	}

	// Granted requests stay when the disk stops taking new ones.
	schedulable := fixtures["schedulable"]
	uuid := ns + "-schedulable"
	ds = writeSpec(t, ctx, ns, uuid, func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = map[string]dsv1.RequestedBytes{"r-0": dsv1.RequestedBytes(50 * gi)}
	})
	if ds.Status.Replicas["r-0"].State != dsv1.RequestStateScheduled {
		t.Fatalf("r-0 on a schedulable disk: %+v", ds.Status.Replicas["r-0"])
	}
	schedulable.Cordoned = true
	if err := schedulable.Apply(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	ds = testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, "the cordoned node's ledger is not Ready", func(ds *dsv1.DiskSchedule) bool {
		return meta.IsStatusConditionFalse(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
	})
	if ds.Status.Replicas["r-0"].ScheduledSize != 50*gi || ds.Status.StorageScheduled != 50*gi {
		t.Errorf("the grant of r-0 changed when the node was cordoned: %+v", ds.Status)
	}

	// Longhorn's over-provisioning Setting scales every limit.
	setting := &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: settings.StorageOverProvisioningPercentage}, Value: "200"}
	if err := env.Client.Create(ctx, setting); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		testenv.WaitLedger(t, ctx, env.Client, ns, ns+"-"+tc.name, ledgerTimeout, "limit 180Gi", func(ds *dsv1.DiskSchedule) bool { return ds.Status.StorageLimit == 180*gi })
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(setting), setting); err != nil {
			return err
		}
		setting.Value = "50"
		return env.Client.Update(ctx, setting)
	})
	if err != nil {
		t.Fatal(err)
	}
	ds = testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, "limit 45Gi, over the 50Gi granted", func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.StorageLimit == 45*gi
	})
	if ds.Status.Replicas["r-0"].ScheduledSize != 50*gi {
		t.Errorf("a lower limit took r-0's grant away: %+v", ds.Status.Replicas["r-0"])
	}
}

// TestActualSpaceFromLonghorn: two replicas of volumes holding 10Gi of data
// each ask at once for a disk of 100Gi that Longhorn measured with 40Gi
// available, under storage-over-provisioning-percentage 200 (limit 200Gi,
// room for both) and storage-minimal-available-percentage 25 (25Gi kept
// free): Longhorn's actual-space rule, counting the first grant, refuses
// the second, saying so in numbers. Once Longhorn's node controller counts
// the first (status.scheduledReplica) and measures the disk again, a new
// request is decided on the new measure.
func TestActualSpaceFromLonghorn(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	uuid := ns + "-uuid-0"
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{
		"disk-0": {UUID: uuid, Size: 100 * gi, Available: 40 * gi},
	}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ name, value string }{
		{settings.StorageOverProvisioningPercentage, "200"}, {settings.StorageMinimalAvailablePercentage, "25"},
	} {
		if err := env.Client.Create(ctx, &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name}, Value: s.value}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"pvc-a", "pvc-b", "pvc-c"} {
		vol := testenv.Volume(ns, name, testenv.VolumeFixture{Size: 50 * gi})
		vol.Status.ActualSize = 10 * gi
		if err := testenv.CreateLonghorn(ctx, env.Client, vol); err != nil {
			t.Fatal(err)
		}
		// Created unscheduled, as Longhorn's volume controller does.
		if err := testenv.CreateLonghorn(ctx, env.Client, testenv.Replica(ns, name+"-r-1", testenv.ReplicaFixture{Volume: name, Size: 50 * gi})); err != nil {
			t.Fatal(err)
		}
	}
	startManagers(t, ns, 1, nil)
	testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, "limit 200Gi", func(ds *dsv1.DiskSchedule) bool { return ds.Status.StorageLimit == 200*gi })

	ds := writeSpec(t, ctx, ns, uuid, func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = map[string]dsv1.RequestedBytes{"pvc-a-r-1": dsv1.RequestedBytes(50 * gi), "pvc-b-r-1": dsv1.RequestedBytes(50 * gi)}
	})
	a, b := ds.Status.Replicas["pvc-a-r-1"], ds.Status.Replicas["pvc-b-r-1"]
	if a.State != dsv1.RequestStateScheduled || b.State != dsv1.RequestStateRejected {
		t.Fatalf("two placements for the last actual space: %+v and %+v, want the first granted and the second rejected", a, b)
	}
	for _, part := range []string{"40Gi available", "10Gi granted here since", "10Gi of the replica's data", "leaves 20Gi", "25Gi", "25% of 100Gi"} {
		if !strings.Contains(b.Message, part) {
			t.Errorf("rejection %q does not say %q", b.Message, part)
		}
	}

	// Longhorn counts pvc-a-r-1 and measures 30Gi more free: a new
	// request fits again.
	f.Disks["disk-0"] = testenv.Disk{UUID: uuid, Size: 100 * gi, Available: 70 * gi, Scheduled: 50 * gi}
	n := f.LonghornNode(ns)
	n.Status.DiskStatus["disk-0"].ScheduledReplica = map[string]int64{"pvc-a-r-1": 50 * gi}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &lhv1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), cur); err != nil {
			return err
		}
		cur.Status = n.Status
		return env.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The controller may decide before its cache holds the new measure: ask
	// afresh, as the gate does, until it has.
	state, err := testenv.Poll(ctx, ledgerTimeout, func(ctx context.Context) (bool, string, error) {
		writeSpec(t, ctx, ns, uuid, func(s *dsv1.DiskScheduleSpec) { delete(s.Replicas, "pvc-b-r-1"); delete(s.Replicas, "pvc-c-r-1") })
		ds := writeSpec(t, ctx, ns, uuid, func(s *dsv1.DiskScheduleSpec) { s.Replicas["pvc-c-r-1"] = dsv1.RequestedBytes(50 * gi) })
		last := ds.Status.Replicas["pvc-c-r-1"]
		return last.State == dsv1.RequestStateScheduled, fmt.Sprintf("%+v", last), nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		t.Errorf("a new request after Longhorn's new measure: %s, want granted: %v", state, err)
	}
}

// writeSpec changes a ledger's spec and waits until the generation it wrote is decided.
func writeSpec(t *testing.T, ctx context.Context, ns, uuid string, mutate func(*dsv1.DiskScheduleSpec)) *dsv1.DiskSchedule {
	t.Helper()
	var generation int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds); err != nil {
			return err
		}
		mutate(&ds.Spec)
		if err := env.Client.Update(ctx, ds); err != nil {
			return err
		}
		generation = ds.Generation
		return nil
	})
	if err != nil {
		t.Fatalf("writing the spec of DiskSchedule %s: %v", uuid, err)
	}
	return testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, fmt.Sprintf("generation %d decided", generation), func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.ObservedGeneration >= generation
	})
}
