package placement

import (
	"reflect"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/settings"
)

// lhCondition returns a Longhorn condition of typ with status.
func lhCondition(typ string, status lhv1.ConditionStatus) lhv1.Condition {
	return lhv1.Condition{Type: typ, Status: status}
}

// longhornNode returns a Longhorn node as longhorn-manager v1.12 writes it:
// two filesystem disks, one with space scheduled, one reserved.
func longhornNode() *lhv1.Node {
	ready := lhCondition(lhv1.DiskConditionTypeReady, lhv1.ConditionStatusTrue)
	schedulable := lhCondition(lhv1.DiskConditionTypeSchedulable, lhv1.ConditionStatusTrue)
	return &lhv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "longhorn-system"},
		Spec: lhv1.NodeSpec{
			Name: "n1", AllowScheduling: true, Tags: []string{"fast"},
			Disks: map[string]lhv1.DiskSpec{
				"d1": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/d1", AllowScheduling: true, Tags: []string{"ssd"}},
				"d2": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/d2", AllowScheduling: true, StorageReserved: 100 * gi},
			},
		},
		Status: lhv1.NodeStatus{
			Zone: "z1",
			Conditions: []lhv1.Condition{
				lhCondition(lhv1.NodeConditionTypeReady, lhv1.ConditionStatusTrue),
				lhCondition(lhv1.NodeConditionTypeSchedulable, lhv1.ConditionStatusTrue),
			},
			DiskStatus: map[string]*lhv1.DiskStatus{
				"d1": {DiskUUID: "uuid-1", StorageMaximum: 500 * gi, StorageAvailable: 400 * gi, StorageScheduled: 200 * gi,
					FSType: "ext4", Conditions: []lhv1.Condition{ready, schedulable}},
				"d2": {DiskUUID: "uuid-2", StorageMaximum: 300 * gi, StorageAvailable: 300 * gi,
					Conditions: []lhv1.Condition{ready, schedulable}},
			},
		},
	}
}

// TestLonghornSpace checks Longhorn's own view of a disk's space: the limit
// from the disk and the over-provisioning setting, scheduled bytes from the
// node's status, and no space for an unknown disk.
func TestLonghornSpace(t *testing.T) {
	s := settings.Default()
	s.OverProvisioningPercentage = 200
	space := LonghornSpace(longhornNode(), s)
	cases := []struct {
		uuid string
		want Space
		ok   bool
	}{
		{"uuid-1", Space{Limit: 1000 * gi, Scheduled: 200 * gi}, true},
		{"uuid-2", Space{Limit: 400 * gi, Scheduled: 0}, true},
		{"uuid-3", Space{}, false},
	}
	for _, c := range cases {
		got, ok := space(c.uuid)
		if got != c.want || ok != c.ok {
			t.Errorf("space(%s) = %+v, %v; want %+v, %v", c.uuid, got, ok, c.want, c.ok)
		}
	}
}

// TestFromLonghorn checks that a Longhorn node becomes placement's node with
// every field in place, and that Place then balances with Longhorn's space.
func TestFromLonghorn(t *testing.T) {
	n := longhornNode()
	s := settings.Default()
	got := FromLonghorn(n, LonghornSpace(n, s))
	byName := map[string]Disk{}
	for _, d := range got.Disks {
		byName[d.Name] = d
	}
	got.Disks = nil
	want := Node{Name: "n1", Zone: "z1", Ready: true, Schedulable: true, AllowScheduling: true, Tags: []string{"fast"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node = %+v, want %+v", got, want)
	}
	wantDisks := map[string]Disk{
		"d1": {Name: "d1", UUID: "uuid-1", Path: "/var/lib/longhorn/d1", Type: lhv1.DiskTypeFilesystem, FSType: "ext4", AllowScheduling: true,
			Schedulable: true, Tags: []string{"ssd"}, StorageMaximum: 500 * gi, StorageAvailable: 400 * gi,
			StorageLimit: 500 * gi, StorageScheduled: 200 * gi},
		"d2": {Name: "d2", UUID: "uuid-2", Path: "/var/lib/longhorn/d2", Type: lhv1.DiskTypeFilesystem, AllowScheduling: true,
			Schedulable: true, StorageMaximum: 300 * gi, StorageAvailable: 300 * gi, StorageReserved: 100 * gi,
			StorageLimit: 200 * gi},
	}
	if !reflect.DeepEqual(byName, wantDisks) {
		t.Errorf("disks =\n%+v\nwant\n%+v", byName, wantDisks)
	}

	// d1 has 300Gi usable, d2 200Gi: a 150Gi replica goes to d1, a second
	// (disk anti-affinity soft, node soft) to d2 (d1 has 150Gi left).
	s.ReplicaSoftAntiAffinity = true
	vol := mkVolume(func(spec *lhv1.VolumeSpec) { spec.Size = 150 * gi })
	res := Place(Request{Volume: vol, Count: 2, Nodes: []Node{FromLonghorn(n, LonghornSpace(n, s))}, Settings: s})
	if len(res.Choices) != 2 || res.Choices[0].DiskUUID != "uuid-1" || res.Choices[1].DiskUUID != "uuid-2" {
		t.Errorf("choices = %+v (%s), want uuid-1 then uuid-2", res.Choices, res.Message)
	}
}

// TestFromLonghornConditions checks that Longhorn's conditions and missing
// status make nodes and disks ineligible, with the reasons Place reports.
func TestFromLonghornConditions(t *testing.T) {
	s := settings.Default()
	cases := []struct {
		name   string
		edit   func(*lhv1.Node)
		reason string
	}{
		{"node not ready", func(n *lhv1.Node) {
			n.Status.Conditions[0].Status = lhv1.ConditionStatusFalse
		}, "n1: node is not ready"},
		{"node cordoned", func(n *lhv1.Node) {
			n.Status.Conditions[1] = lhv1.Condition{Type: lhv1.NodeConditionTypeSchedulable, Status: lhv1.ConditionStatusFalse,
				Reason: lhv1.NodeConditionReasonKubernetesNodeCordoned}
		}, "n1: node is cordoned"},
		{"disk pressure", func(n *lhv1.Node) {
			n.Status.DiskStatus["d1"].Conditions[1].Status = lhv1.ConditionStatusFalse
		}, "n1/d1: disk is not schedulable"},
		{"disk not ready", func(n *lhv1.Node) {
			n.Status.DiskStatus["d1"].Conditions[0].Status = lhv1.ConditionStatusFalse
		}, "n1/d1: disk is not schedulable"},
		{"disk not measured", func(n *lhv1.Node) {
			delete(n.Status.DiskStatus, "d1")
		}, "n1/d1: disk has no UUID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := longhornNode()
			c.edit(n)
			// 250Gi fits only d1 (d2's limit is 200Gi), so every case fails.
			vol := mkVolume(func(spec *lhv1.VolumeSpec) { spec.Size = 250 * gi })
			res := Place(Request{Volume: vol, Count: 1, Nodes: []Node{FromLonghorn(n, LonghornSpace(n, s))}, Settings: s})
			if len(res.Choices) != 0 {
				t.Fatalf("placed %+v, want nothing", res.Choices)
			}
			found := false
			for _, f := range res.Failures {
				who := f.Node
				if f.Disk != "" {
					who += "/" + f.Disk
				}
				for _, r := range f.Reasons {
					found = found || who+": "+r == c.reason
				}
			}
			if !found {
				t.Errorf("failures %v do not include %q", res.Failures, c.reason)
			}
		})
	}
}

// TestFromLonghornReplica checks how each kind of Longhorn replica counts,
// as Longhorn's scheduler counts it.
func TestFromLonghornReplica(t *testing.T) {
	scheduled := func(edit func(*lhv1.Replica)) *lhv1.Replica {
		r := &lhv1.Replica{Spec: lhv1.ReplicaSpec{InstanceSpec: lhv1.InstanceSpec{NodeID: "n1"}, DiskID: "uuid-1",
			HealthyAt: "2026-01-01T00:00:00Z"}}
		if edit != nil {
			edit(r)
		}
		return r
	}
	failed := func(r *lhv1.Replica) { r.Spec.FailedAt = "2026-01-02T00:00:00Z" }
	cases := []struct {
		name         string
		replica      *lhv1.Replica
		replenishing bool
		want         Replica
		ok           bool
	}{
		{"healthy", scheduled(nil), false, Replica{NodeID: "n1", DiskUUID: "uuid-1", Healthy: true}, true},
		{"not scheduled", scheduled(func(r *lhv1.Replica) { r.Spec.NodeID = "" }), false, Replica{}, false},
		{"failed, reusable", scheduled(failed), false, Replica{NodeID: "n1", DiskUUID: "uuid-1"}, true},
		{"failed, replenishing", scheduled(failed), true, Replica{NodeID: "n1", DiskUUID: "uuid-1", DiskOnly: true}, true},
		{"healthy, replenishing", scheduled(nil), true, Replica{NodeID: "n1", DiskUUID: "uuid-1", Healthy: true}, true},
		{"failed, never used", scheduled(func(r *lhv1.Replica) { failed(r); r.Spec.HealthyAt = "" }), false,
			Replica{NodeID: "n1", DiskUUID: "uuid-1"}, true},
		{"failed, retried 5 times", scheduled(func(r *lhv1.Replica) { failed(r); r.Spec.RebuildRetryCount = 5 }), false, Replica{}, false},
		{"failed, no disk", scheduled(func(r *lhv1.Replica) { failed(r); r.Spec.DiskID = "" }), false, Replica{}, false},
		{"failed, evicted", scheduled(func(r *lhv1.Replica) { failed(r); r.Spec.EvictionRequested = true }), false, Replica{}, false},
		{"evicted", scheduled(func(r *lhv1.Replica) { r.Spec.EvictionRequested = true }), false,
			Replica{NodeID: "n1", DiskUUID: "uuid-1", Healthy: true, EvictionRequested: true}, true},
		{"being deleted", scheduled(func(r *lhv1.Replica) { r.DeletionTimestamp = &metav1.Time{} }), false,
			Replica{NodeID: "n1", DiskUUID: "uuid-1", Healthy: true, DiskOnly: true}, true},
	}
	for _, c := range cases {
		got, ok := FromLonghornReplica(c.replica, c.replenishing)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: FromLonghornReplica = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestReplenishing checks when Longhorn replaces failed replicas rather
// than waiting to reuse them.
func TestReplenishing(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vol := func(rob lhv1.VolumeRobustness, since string) *lhv1.Volume {
		return &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"},
			Status: lhv1.VolumeStatus{Robustness: rob, LastDegradedAt: since}}
	}
	cases := []struct {
		name    string
		vol     *lhv1.Volume
		want    bool
		wantErr bool
	}{
		{"healthy", vol(lhv1.VolumeRobustnessHealthy, ""), false, false},
		{"faulted", vol(lhv1.VolumeRobustnessFaulted, "2026-01-01T00:00:00Z"), false, false},
		{"degraded within the wait", vol(lhv1.VolumeRobustnessDegraded, "2026-01-01T11:55:00Z"), false, false},
		{"degraded exactly the wait", vol(lhv1.VolumeRobustnessDegraded, "2026-01-01T11:50:00Z"), false, false},
		{"degraded past the wait", vol(lhv1.VolumeRobustnessDegraded, "2026-01-01T11:49:59Z"), true, false},
		{"degraded since no time", vol(lhv1.VolumeRobustnessDegraded, ""), false, true},
	}
	for _, c := range cases {
		got, err := Replenishing(c.vol, 10*time.Minute, now)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: Replenishing = %v, %v; want %v, error %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}
