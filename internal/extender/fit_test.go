package extender

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
)

const gi = int64(1) << 30

func readyConditions() []metav1.Condition {
	return []metav1.Condition{
		{Type: longhornv1.NodeConditionReady, Status: metav1.ConditionTrue},
		{Type: longhornv1.NodeConditionSchedulable, Status: metav1.ConditionTrue},
	}
}

// testNode returns a schedulable node with disks of the given free sizes and
// their ledgers (limit = size, nothing scheduled but used).
func testNode(name string, sizes []int64, used []int64) (*longhornv1.Node, map[string]*longhornv1.DiskSchedule) {
	n := &longhornv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   longhornv1.NodeSpec{AllowScheduling: true, Disks: map[string]longhornv1.DiskSpec{}},
		Status: longhornv1.NodeStatus{Conditions: readyConditions(), DiskStatus: map[string]*longhornv1.DiskStatus{}}}
	ledgers := map[string]*longhornv1.DiskSchedule{}
	for i, size := range sizes {
		disk, uuid := fmt.Sprintf("disk-%d", i+1), fmt.Sprintf("%s-uuid-%d", name, i+1)
		n.Spec.Disks[disk] = longhornv1.DiskSpec{Path: "/d", AllowScheduling: true}
		n.Status.DiskStatus[disk] = &longhornv1.DiskStatus{DiskUUID: uuid, StorageMaximum: size, StorageAvailable: size,
			Conditions: []metav1.Condition{{Type: longhornv1.DiskConditionSchedulable, Status: metav1.ConditionTrue}}}
		ds := &longhornv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: uuid},
			Spec: longhornv1.DiskScheduleSpec{Name: disk, NodeID: name},
			Status: longhornv1.DiskScheduleStatus{StorageLimit: size,
				Conditions: []metav1.Condition{{Type: longhornv1.DiskScheduleConditionReady, Status: metav1.ConditionTrue}}}}
		if used != nil {
			ds.Status.StorageScheduled = used[i]
		}
		ledgers[uuid] = ds
	}
	return n, ledgers
}

func volumes(n int, size int64) []podVolume {
	var out []podVolume
	for i := range n {
		out = append(out, podVolume{Name: fmt.Sprintf("pvc-%d", i), Size: size, ReplicaNodes: map[string]bool{}})
	}
	return out
}

// TestMultiVolumePodFitsOnlyOnTheFourDiskNode is the seed's multi-PVC case:
// four 100Gi volumes and nodes with 1, 2, 3 and 4 disks of 100Gi.
func TestMultiVolumePodFitsOnlyOnTheFourDiskNode(t *testing.T) {
	sched := settings.Default()
	for disks := 1; disks <= 4; disks++ {
		sizes := make([]int64, disks)
		for i := range sizes {
			sizes[i] = 100 * gi
		}
		node, ledgers := testNode(fmt.Sprintf("node-%d", disks), sizes, nil)
		f := evaluate(volumes(4, 100*gi), node, ledgers, sched, "default/p", 0)
		if f.OK != (disks == 4) {
			t.Errorf("node with %d disks: fits=%v (%s)", disks, f.OK, f.Reason)
		}
		if disks == 4 {
			used := map[string]bool{}
			for _, uuid := range f.Assignment {
				used[uuid] = true
			}
			if len(f.Assignment) != 4 || len(used) != 4 {
				t.Errorf("want the 4 volumes on 4 different disks, got %v", f.Assignment)
			}
		} else if !strings.Contains(f.Reason, "400Gi") {
			t.Errorf("node with %d disks: the reason should give the numbers, got %q", disks, f.Reason)
		}
	}
}

func TestEvaluateCountsLedgerUsageAndOwnReservations(t *testing.T) {
	sched := settings.Default()
	node, ledgers := testNode("n", []int64{400 * gi}, []int64{350 * gi})
	vols := volumes(1, 100*gi)
	if f := evaluate(vols, node, ledgers, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, "50Gi") {
		t.Errorf("350Gi of 400Gi scheduled: want no fit with 50Gi free in the reason, got %+v", f)
	}
	// The pod's own granted reservation (counted in storageScheduled) is its to use.
	ds := ledgers["n-uuid-1"]
	ds.Spec.Reservations = map[string]longhornv1.DiskScheduleReservation{"pvc-0": {Size: 100 * gi, Pod: "default/p"}}
	ds.Status.Reservations = map[string]longhornv1.ReservationStatus{"pvc-0": {State: longhornv1.ReservationStateScheduled, RequestedSize: 100 * gi, Pod: "default/p", ScheduledSize: 100 * gi}}
	if f := evaluate(vols, node, ledgers, sched, "default/p", 0); !f.OK {
		t.Errorf("the pod's own reservation should count as free for it: %+v", f)
	}
	if f := evaluate(vols, node, ledgers, sched, "default/other", 0); f.OK {
		t.Errorf("another pod's reservation must not count as free: %+v", f)
	}
	// Pending requests count as taken.
	ds.Spec.Reservations, ds.Status.Reservations = nil, nil
	ds.Status.StorageScheduled = 200 * gi
	ds.Spec.Replicas = map[string]longhornv1.RequestedBytes{"r-pending": longhornv1.RequestedBytes(150 * gi)}
	if f := evaluate(vols, node, ledgers, sched, "default/p", 0); f.OK {
		t.Errorf("200Gi scheduled + 150Gi pending of 400Gi: 100Gi must not fit: %+v", f)
	}
}

func TestEvaluateSkipsVolumesWithAReplicaOnTheNode(t *testing.T) {
	node, ledgers := testNode("n", []int64{100 * gi}, []int64{100 * gi})
	vols := volumes(1, 100*gi)
	vols[0].ReplicaNodes["n"] = true
	if f := evaluate(vols, node, ledgers, settings.Default(), "default/p", 0); !f.OK || len(f.Assignment) != 0 {
		t.Errorf("a volume with a replica on the node needs no space there: %+v", f)
	}
}

func TestEvaluateNodeEligibility(t *testing.T) {
	sched := settings.Default()
	for _, tc := range []struct {
		name   string
		mutate func(*longhornv1.Node)
		want   string
	}{
		{"scheduling disabled", func(n *longhornv1.Node) { n.Spec.AllowScheduling = false }, "scheduling is disabled"},
		{"evicting", func(n *longhornv1.Node) { n.Spec.EvictionRequested = true }, "eviction is requested"},
		{"not ready", func(n *longhornv1.Node) { n.Status.Conditions[0].Status = metav1.ConditionFalse }, "not ready"},
		{"cordoned", func(n *longhornv1.Node) { n.Status.Conditions[1].Status = metav1.ConditionFalse }, "not schedulable"},
		{"node selector", func(n *longhornv1.Node) { n.Spec.Tags = []string{"slow"} }, "do not match node selector"},
		{"disk pressure", func(n *longhornv1.Node) {
			n.Status.DiskStatus["disk-1"].Conditions[0].Status = metav1.ConditionFalse
		}, "no schedulable disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, ledgers := testNode("n", []int64{400 * gi}, nil)
			tc.mutate(node)
			vols := volumes(1, 10*gi)
			if tc.name == "node selector" {
				vols[0].NodeSelector = []string{"fast"}
			}
			if f := evaluate(vols, node, ledgers, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, tc.want) {
				t.Errorf("want no fit because %q, got %+v", tc.want, f)
			}
		})
	}
}

func TestEvaluateEmptyDiskSelectorSetting(t *testing.T) {
	node, ledgers := testNode("n", []int64{100 * gi}, nil)
	spec := node.Spec.Disks["disk-1"]
	spec.Tags = []string{"ssd"}
	node.Spec.Disks["disk-1"] = spec
	vols := volumes(1, 10*gi)
	sched := settings.Default()
	if f := evaluate(vols, node, ledgers, sched, "default/p", 0); !f.OK {
		t.Errorf("allow-empty-disk-selector-volume=true: a tagged disk takes a selector-less volume: %+v", f)
	}
	sched.AllowEmptyDiskSelectorVolume = false
	if f := evaluate(vols, node, ledgers, sched, "default/p", 0); f.OK {
		t.Errorf("allow-empty-disk-selector-volume=false: a tagged disk must not take a selector-less volume: %+v", f)
	}
}

func TestRestartNode(t *testing.T) {
	vols := volumes(2, gi)
	vols[0].ReplicaNodes["b"], vols[1].ReplicaNodes["b"] = true, true
	vols[0].ReplicaNodes["a"] = true
	if got := restartNode(vols, []string{"c", "a", "b"}); got != "b" {
		t.Errorf("restartNode = %q, want b (the only node with a replica of every volume)", got)
	}
	if got := restartNode(vols, []string{"a", "c"}); got != "" {
		t.Errorf("restartNode = %q, want none", got)
	}
}
